-- Write the end of many attempts in one statement. An ack applies only while its row is still
-- executing the same attempt: a rescued and re-claimed job is never overwritten by a stale ack.
-- :acks is a JSON array of {id, attempt, state, scheduled_at, error, meta, snoozed}; scheduled_at is
-- already computed from the ack's schedule_in and the clock. conveyor_json_merge (a function the
-- engine registers on its connections) merges top-level keys as PostgreSQL's jsonb || does.
WITH acks AS (
    SELECT
        value ->> 'id' AS id,
        value ->> 'attempt' AS attempt,
        value ->> 'state' AS state,
        value ->> 'scheduled_at' AS scheduled_at,
        value ->> 'error' AS error,
        value ->> 'meta' AS meta,
        value ->> 'snoozed' AS snoozed
    FROM json_each(:acks)
)
UPDATE oban_jobs AS j
SET state = a.state,
    completed_at = CASE WHEN a.state = 'completed' THEN :now ELSE j.completed_at END,
    discarded_at = CASE WHEN a.state = 'discarded' THEN :now ELSE j.discarded_at END,
    cancelled_at = CASE WHEN a.state = 'cancelled' THEN :now ELSE j.cancelled_at END,
    scheduled_at = coalesce(a.scheduled_at, j.scheduled_at),
    attempt = CASE WHEN a.snoozed THEN j.attempt - 1 ELSE j.attempt END,
    errors = CASE WHEN a.error IS NULL THEN j.errors ELSE json_insert(j.errors, '$[#]', json(a.error)) END,
    meta = CASE
        WHEN a.snoozed THEN json_set(j.meta, '$.snoozed', coalesce(CAST(j.meta ->> 'snoozed' AS INTEGER), 0) + 1)
        WHEN a.meta IS NULL THEN j.meta
        ELSE conveyor_json_merge(j.meta, a.meta)
    END
FROM acks AS a
WHERE j.id = a.id
  -- The unary + keeps the planner on the primary key (one lookup per ack) rather than the state
  -- index (every executing job, each joined against every ack).
  AND +j.state = 'executing'
  AND j.attempt = a.attempt
RETURNING id;
