-- Insert a batch of jobs from one JSON array parameter, in input order, and notify each queue that
-- gained available jobs. The notification is sent by this statement, inside the caller's
-- transaction, so listeners hear of the jobs exactly when they become visible (on commit).
WITH clock AS (
    SELECT coalesce(%(now)s::timestamp, timezone('UTC', now())) AS now
),
input AS (
    SELECT j.*, coalesce(j.scheduled_at, clock.now + make_interval(secs => coalesce(j.schedule_in, 0))) AS run_at
    FROM clock,
    ROWS FROM (
        jsonb_to_recordset(%(jobs)s::jsonb) AS (
            worker text, queue text, args jsonb, meta jsonb, tags text[], priority smallint,
            max_attempts smallint, scheduled_at timestamp, schedule_in double precision
        )
    ) WITH ORDINALITY AS j(
        worker, queue, args, meta, tags, priority, max_attempts, scheduled_at, schedule_in, ord
    )
),
inserted AS (
    INSERT INTO {prefix}.oban_jobs (
        state, queue, worker, args, meta, tags, priority, max_attempts, scheduled_at, inserted_at
    )
    SELECT
        CASE WHEN input.run_at > clock.now THEN 'scheduled' ELSE 'available' END::{prefix}.oban_job_state,
        input.queue, input.worker, input.args, input.meta, input.tags, input.priority,
        input.max_attempts, input.run_at, clock.now
    FROM input, clock
    ORDER BY input.ord
    RETURNING id, queue, state
),
notified AS (
    SELECT pg_notify(%(channel)s, jsonb_build_object('queue', queue)::text)
    FROM (SELECT DISTINCT queue FROM inserted WHERE state = 'available') AS queues
)
SELECT id, (SELECT count(*) FROM notified) AS notified FROM inserted ORDER BY id;
