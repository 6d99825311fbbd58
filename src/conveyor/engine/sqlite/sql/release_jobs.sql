-- Give jobs back at shutdown: still-executing attempts return to available without spending the
-- attempt, so another node (or this one after restart) runs them again at once.
WITH given AS (
    SELECT value ->> 'id' AS id, value ->> 'attempt' AS attempt FROM json_each(:jobs)
)
UPDATE oban_jobs AS j
SET state = 'available', attempt = max(j.attempt - 1, 0)
FROM given AS r
-- The unary + keeps the planner on the primary key (see ack_jobs.sql).
WHERE j.id = r.id AND +j.state = 'executing' AND j.attempt = r.attempt
RETURNING id, queue;
