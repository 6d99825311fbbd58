-- Give jobs back at shutdown: still-executing attempts return to available without spending the
-- attempt, so another node (or this one after restart) runs them again at once.
WITH released AS (
    UPDATE {prefix}.oban_jobs AS j
    SET state = 'available', attempt = greatest(j.attempt - 1, 0)
    FROM jsonb_to_recordset(%(jobs)s::jsonb) AS r(id bigint, attempt smallint)
    WHERE j.id = r.id AND j.state = 'executing' AND j.attempt = r.attempt
    RETURNING j.id, j.queue
),
notified AS (
    SELECT pg_notify(%(insert_channel)s, jsonb_build_object('queue', queue)::text)
    FROM (SELECT DISTINCT queue FROM released) AS queues
)
SELECT id, (SELECT count(*) FROM notified) FROM released;
