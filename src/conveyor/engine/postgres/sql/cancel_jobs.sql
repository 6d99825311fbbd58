-- Cancel every matching job that is not final. Executing jobs are marked cancelled too (their late
-- ack only applies to executing rows, so it cannot undo this) and their nodes are told to stop them
-- with Oban's "pkill" signal.
WITH clock AS (
    SELECT coalesce(%(now)s::timestamp, timezone('UTC', now())) AS now
),
targets AS (
    SELECT id, state FROM {prefix}.oban_jobs
    WHERE {filter}
      AND state NOT IN ('completed', 'discarded', 'cancelled')
    ORDER BY id
    LIMIT %(limit)s
    FOR UPDATE
),
cancelled AS (
    UPDATE {prefix}.oban_jobs AS j
    SET state = 'cancelled', cancelled_at = clock.now
    FROM targets, clock
    WHERE j.id = targets.id
    RETURNING j.id, targets.state AS previous_state
),
signalled AS (
    SELECT pg_notify(%(signal_channel)s, jsonb_build_object('action', 'pkill', 'job_id', id)::text)
    FROM cancelled WHERE previous_state = 'executing'
),
ended AS (
    SELECT pg_notify(%(ended_channel)s, jsonb_build_object('ids', jsonb_agg(id))::text)
    FROM (SELECT id, (row_number() OVER () - 1) / 500 AS chunk FROM cancelled) AS numbered
    GROUP BY chunk
)
SELECT id, (SELECT count(*) FROM signalled) + (SELECT count(*) FROM ended) FROM cancelled ORDER BY id;
