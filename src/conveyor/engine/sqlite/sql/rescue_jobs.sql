-- Rescue orphaned jobs: executing jobs whose producer stopped sending heartbeats (row older than
-- :dead_before), and, as a backstop, executing jobs with no producer row at all that started before
-- :backstop_before. A job whose producer row is fresh is never touched, however long it runs, nor
-- one of a producer in :live (a JSON array of the rescuer's own producers, running as it asks).
-- Rescued jobs become available again (discarded when their attempts are used up) and count the
-- rescue in meta. attempted_by ->> 1 is the producer uuid (PostgreSQL's attempted_by[2]).
-- Conveyor's rows (meta.runtime = 'conveyor') are dead before :dead_before; other runtimes' rows
-- before :foreign_dead_before, and never while it is NULL.
UPDATE oban_jobs
SET state = CASE WHEN attempt >= max_attempts THEN 'discarded' ELSE 'available' END,
    discarded_at = CASE WHEN attempt >= max_attempts THEN :now ELSE discarded_at END,
    -- Free-form meta (see ack_jobs.sql): set into an object only, count up a number only.
    meta = json_set(
        CASE WHEN json_valid(meta) THEN CASE WHEN json_type(meta) = 'object' THEN meta ELSE '{}' END ELSE '{}' END,
        '$.rescued', 1 + CASE
            WHEN json_valid(meta) THEN CASE
                WHEN json_type(meta, '$.rescued') IN ('integer', 'real')
                THEN max(0, min(CAST(meta ->> 'rescued' AS INTEGER), 1000000000))
                ELSE 0
            END
            ELSE 0
        END)
WHERE id IN (
    SELECT j.id
    FROM oban_jobs AS j
    WHERE j.state = 'executing'
      AND (
        j.attempted_by ->> 1 IN (
            SELECT uuid FROM oban_producers
            WHERE updated_at < CASE WHEN {own_producer} THEN :dead_before ELSE :foreign_dead_before END
              AND uuid NOT IN (SELECT value FROM json_each(:live))
        )
        OR (
            j.attempted_at < :backstop_before
            AND NOT EXISTS (SELECT 1 FROM oban_producers AS p WHERE p.uuid = j.attempted_by ->> 1)
        )
      )
    ORDER BY j.id
    LIMIT :limit
)
RETURNING id, queue, state;
