-- Write the end of many attempts in one statement. An ack applies only while its row is still
-- executing the same attempt: a rescued and re-claimed job is never overwritten by a stale ack.
-- Given :node, also only while the row's claim is that node's (attempted_by[0]; an attempted_by
-- that is not JSON is nobody's), as on PostgreSQL.
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
    -- errors and meta may hold anything another client wrote: append to an array only, merge into
    -- an object only, count up a number only (nested CASEs, since json_type fails on malformed
    -- text). One row's junk must never make the statement, and so every ack of its batch, fail.
    errors = CASE
        WHEN a.error IS NULL THEN j.errors
        ELSE json_insert(
            CASE WHEN json_valid(j.errors) THEN CASE WHEN json_type(j.errors) = 'array' THEN j.errors ELSE '[]' END ELSE '[]' END,
            '$[#]', json(a.error))
    END,
    meta = CASE
        -- A snooze makes the job scheduled again. A unique job not unique while executing (the
        -- 'scheduled' group) would then re-enter the unique index, where a twin inserted meanwhile
        -- may hold its key: it drops its markers instead (see conveyor/unique.py).
        WHEN a.snoozed THEN conveyor_json_merge(json_remove(json_set(
            CASE WHEN json_valid(j.meta) THEN CASE WHEN json_type(j.meta) = 'object' THEN j.meta ELSE '{}' END ELSE '{}' END,
            '$.snoozed', 1 + CASE
                WHEN json_valid(j.meta) THEN CASE
                    WHEN json_type(j.meta, '$.snoozed') IN ('integer', 'real')
                    THEN max(0, min(CAST(j.meta ->> 'snoozed' AS INTEGER), 1000000000))
                    ELSE 0
                END
                ELSE 0
            END),
            CASE
                WHEN (CASE WHEN json_valid(j.meta) THEN j.meta ->> 'uniq_key' END) IS NOT NULL
                    AND instr(CASE WHEN json_valid(j.meta) THEN coalesce(j.meta ->> 'uniq_states', '') ELSE '' END, '"executing"') = 0
                THEN '$.uniq_key' ELSE '$.conveyor_none'
            END,
            CASE
                WHEN (CASE WHEN json_valid(j.meta) THEN j.meta ->> 'uniq_key' END) IS NOT NULL
                    AND instr(CASE WHEN json_valid(j.meta) THEN coalesce(j.meta ->> 'uniq_states', '') ELSE '' END, '"executing"') = 0
                THEN '$.uniq_states' ELSE '$.conveyor_none'
            END), a.meta)
        WHEN a.meta IS NULL THEN j.meta
        ELSE conveyor_json_merge(j.meta, a.meta)
    END
FROM acks AS a
WHERE j.id = a.id
  -- The unary + keeps the planner on the primary key (one lookup per ack) rather than the state
  -- index (every executing job, each joined against every ack).
  AND +j.state = 'executing'
  AND j.attempt = a.attempt
  AND (:node IS NULL OR CASE WHEN json_valid(j.attempted_by) THEN j.attempted_by ->> 0 END = :node)
-- The second column says whether a workflow step finished: its dependents may go on now.
-- (RETURNING sees the updated row only: its state is the ack's now.)
-- Nested CASEs, not AND: SQLite may read meta as JSON before json_valid says it is not.
RETURNING id, state IN ('completed', 'cancelled', 'discarded') AND (CASE WHEN json_valid(meta) THEN (CASE WHEN json_type(meta) = 'object' THEN meta ->> 'workflow_id' IS NOT NULL ELSE 0 END) ELSE 0 END);
