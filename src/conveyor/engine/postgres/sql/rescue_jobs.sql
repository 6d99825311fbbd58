-- Rescue orphaned jobs: executing jobs whose producer stopped sending heartbeats, and, as a
-- backstop, executing jobs with no producer row at all that started longer ago than %(backstop)s.
-- A job whose producer row is fresh is never touched, however long it runs, nor one of a producer
-- in %(live)s (the rescuer's own, running as it asks). Rescued jobs become available again
-- (discarded when their attempts are used up), count the rescue in meta, and get an errors entry
-- ({attempt, at, error}, as Oban writes them) saying why: the attempt ended because its node
-- stopped, not because the job failed, and a discarded job must not go without a reason.
-- Conveyor's rows (meta.runtime = 'conveyor') are dead after %(timeout)s; other runtimes' rows
-- (oban-py refreshes every 15 s) after %(foreign_timeout)s, and never while it is NULL.
-- The backstop dates a job by attempted_at, or by scheduled_at when another client left that NULL:
-- the attempt cannot have begun before the job was due, so it still waits the whole backstop.
-- {append_error} appends a.error to j.errors as the column's type needs (see ack_jobs.sql).
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
    SELECT j.id, jsonb_build_object(
        'attempt', j.attempt,
        -- As Python's isoformat writes an aware UTC time (acks.error_entry): no fraction when 0.
        'at', to_char(clock.now, 'YYYY-MM-DD"T"HH24:MI:SS')
            || CASE WHEN to_char(clock.now, 'US') = '000000' THEN '' ELSE to_char(clock.now, '.US') END
            || '+00:00',
        'error', CASE
            WHEN j.attempted_by[2] IN (SELECT uuid FROM dead)
            THEN 'the node running this job (' || coalesce(j.attempted_by[1], 'unknown') || ') stopped sending heartbeats'
            ELSE 'executing for over ' || %(backstop)s::float8::text || ' s with no heartbeat row of its node ('
                || coalesce(j.attempted_by[1], 'unknown') || ')'
        END || CASE
            WHEN j.attempt >= j.max_attempts THEN '; discarded: no attempts left'
            ELSE '; rescued to run again'
        END
    ) AS error
    FROM {prefix}.oban_jobs AS j, clock
    WHERE j.state = 'executing'
      AND (
        j.attempted_by[2] IN (SELECT uuid FROM dead)
        OR (
            coalesce(j.attempted_at, j.scheduled_at) < clock.now - make_interval(secs => %(backstop)s)
            AND NOT EXISTS (
                SELECT 1 FROM {prefix}.oban_producers AS p WHERE p.uuid::text = j.attempted_by[2]
            )
        )
      )
    ORDER BY j.id
    LIMIT %(limit)s
    FOR UPDATE OF j SKIP LOCKED
),
rescued AS (
    UPDATE {prefix}.oban_jobs AS j
    SET state = CASE WHEN j.attempt >= j.max_attempts THEN 'discarded' ELSE 'available' END::{prefix}.oban_job_state,
        discarded_at = CASE WHEN j.attempt >= j.max_attempts THEN clock.now ELSE j.discarded_at END,
        errors = {append_error},
        -- Free-form meta (see ack_jobs.sql): merge into an object only, count up a number only.
        meta = (CASE WHEN jsonb_typeof(j.meta) = 'object' THEN j.meta ELSE '{}' END)
            || jsonb_build_object('rescued', 1 + CASE
                WHEN jsonb_typeof(j.meta -> 'rescued') = 'number'
                THEN least(greatest(floor((j.meta -> 'rescued')::numeric), 0), 1000000000)::int
                ELSE 0
            END)
    FROM orphans AS a, clock
    WHERE j.id = a.id
    RETURNING j.id, j.queue, j.state
),
notified AS (
    SELECT pg_notify(%(insert_channel)s, jsonb_build_object('queue', queue)::text)
    FROM (SELECT DISTINCT queue FROM rescued WHERE state = 'available') AS queues
)
SELECT id, state::text, (SELECT count(*) FROM notified) FROM rescued ORDER BY id;
