-- Rescue orphaned jobs: executing jobs whose producer stopped sending heartbeats (row older than
-- :dead_before), and, as a backstop, executing jobs with no producer row at all that started before
-- :backstop_before. A job whose producer row is fresh is never touched, however long it runs, nor
-- one of a producer in :live (a JSON array of the rescuer's own producers, running as it asks).
-- Rescued jobs become available again (discarded when their attempts are used up), count the
-- rescue in meta, and get an errors entry ({attempt, at, error}) saying why: the attempt ended
-- because its node stopped, not because the job failed, and a discarded job must not go without a
-- reason. attempted_by ->> 1 is the producer uuid (PostgreSQL's attempted_by[2]), ->> 0 the node.
-- Conveyor's rows (meta.runtime = 'conveyor') are dead before :dead_before; other runtimes' rows
-- before :foreign_dead_before, and never while it is NULL.
-- The backstop dates a job by attempted_at, or by scheduled_at when another client left that NULL:
-- the attempt cannot have begun before the job was due, so it still waits the whole backstop.
-- An attempted_by another client wrote may be anything: read as JSON only when it is JSON.
UPDATE oban_jobs AS j
SET state = CASE WHEN j.attempt >= j.max_attempts THEN 'discarded' ELSE 'available' END,
    discarded_at = CASE WHEN j.attempt >= j.max_attempts THEN :now ELSE j.discarded_at END,
    errors = json_insert(
        CASE WHEN json_valid(j.errors) THEN CASE WHEN json_type(j.errors) = 'array' THEN j.errors ELSE '[]' END ELSE '[]' END,
        '$[#]', json_object(
            'attempt', j.attempt,
            'at', :at,
            'error', o.reason || CASE
                WHEN j.attempt >= j.max_attempts THEN '; discarded: no attempts left'
                ELSE '; rescued to run again'
            END)),
    -- Free-form meta (see ack_jobs.sql): set into an object only, count up a number only.
    meta = json_set(
        CASE WHEN json_valid(j.meta) THEN CASE WHEN json_type(j.meta) = 'object' THEN j.meta ELSE '{}' END ELSE '{}' END,
        '$.rescued', 1 + CASE
            WHEN json_valid(j.meta) THEN CASE
                WHEN json_type(j.meta, '$.rescued') IN ('integer', 'real')
                THEN max(0, min(CAST(j.meta ->> 'rescued' AS INTEGER), 1000000000))
                ELSE 0
            END
            ELSE 0
        END)
FROM (
    SELECT id, reason FROM (
        SELECT c.id, CASE
            WHEN c.producer IN (
                SELECT uuid FROM oban_producers
                WHERE updated_at < CASE WHEN {own_producer} THEN :dead_before ELSE :foreign_dead_before END
                  AND uuid NOT IN (SELECT value FROM json_each(:live))
            )
            THEN 'the node running this job (' || coalesce(c.node, 'unknown') || ') stopped sending heartbeats'
            WHEN coalesce(c.attempted_at, c.scheduled_at) < :backstop_before
                AND NOT EXISTS (SELECT 1 FROM oban_producers AS p WHERE p.uuid = c.producer)
            THEN 'executing for over ' || :backstop || ' s with no heartbeat row of its node ('
                || coalesce(c.node, 'unknown') || ')'
        END AS reason
        FROM (
            SELECT id, attempted_at, scheduled_at,
                CASE WHEN json_valid(attempted_by) THEN attempted_by ->> 0 END AS node,
                CASE WHEN json_valid(attempted_by) THEN attempted_by ->> 1 END AS producer
            FROM oban_jobs
            WHERE state = 'executing'
        ) AS c
    )
    WHERE reason IS NOT NULL
    ORDER BY id
    LIMIT :limit
) AS o
WHERE j.id = o.id
RETURNING id, queue, state;
