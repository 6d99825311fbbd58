-- Rescue orphaned jobs: executing jobs whose producer stopped sending heartbeats, and, as a
-- backstop, executing jobs with no producer row at all that started longer ago than %(backstop)s.
-- A job whose producer row is fresh is never touched, however long it runs, nor one of a producer
-- in %(live)s (the rescuer's own, running as it asks). Rescued jobs become available again
-- (discarded when their attempts are used up) and count the rescue in meta.
-- Conveyor's rows (meta.runtime = 'conveyor') are dead after %(timeout)s; other runtimes' rows
-- (oban-py refreshes every 15 s) after %(foreign_timeout)s, and never while it is NULL.
WITH clock AS (
    SELECT coalesce(%(now)s::timestamp, timezone('UTC', now())) AS now
),
dead AS (
    SELECT p.uuid::text AS uuid
    FROM {prefix}.oban_producers AS p, clock
    WHERE p.updated_at < clock.now - make_interval(secs => CASE
            WHEN p.meta ->> 'runtime' = 'conveyor' THEN %(timeout)s::float8
            ELSE %(foreign_timeout)s::float8
        END)
      AND p.uuid::text <> ALL(%(live)s::text[])
),
orphans AS (
    SELECT j.id
    FROM {prefix}.oban_jobs AS j, clock
    WHERE j.state = 'executing'
      AND (
        j.attempted_by[2] IN (SELECT uuid FROM dead)
        OR (
            j.attempted_at < clock.now - make_interval(secs => %(backstop)s)
            AND NOT EXISTS (
                SELECT 1 FROM {prefix}.oban_producers AS p WHERE p.uuid::text = j.attempted_by[2]
            )
        )
      )
    ORDER BY j.id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
rescued AS (
    UPDATE {prefix}.oban_jobs AS j
    SET state = CASE WHEN j.attempt >= j.max_attempts THEN 'discarded' ELSE 'available' END::{prefix}.oban_job_state,
        discarded_at = CASE WHEN j.attempt >= j.max_attempts THEN clock.now ELSE j.discarded_at END,
        -- Free-form meta (see ack_jobs.sql): merge into an object only, count up a number only.
        meta = (CASE WHEN jsonb_typeof(j.meta) = 'object' THEN j.meta ELSE '{}' END)
            || jsonb_build_object('rescued', 1 + CASE
                WHEN jsonb_typeof(j.meta -> 'rescued') = 'number'
                THEN least(greatest(floor((j.meta -> 'rescued')::numeric), 0), 1000000000)::int
                ELSE 0
            END)
    FROM orphans, clock
    WHERE j.id = orphans.id
    RETURNING j.id, j.queue, j.state
),
notified AS (
    SELECT pg_notify(%(insert_channel)s, jsonb_build_object('queue', queue)::text)
    FROM (SELECT DISTINCT queue FROM rescued WHERE state = 'available') AS queues
)
SELECT id, state::text, (SELECT count(*) FROM notified) FROM rescued ORDER BY id;
