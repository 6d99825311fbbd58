-- One job without unique or lock (the call a web request makes): insert_jobs.sql for one request,
-- its values as parameters rather than a JSON array to unpack and order, which took a quarter of
-- the call's time (server and client; benchmarks/README.md, enqueue-one). Same state, times and
-- notification: sent by this statement, so listeners hear of the job when it becomes visible.
WITH clock AS (
    SELECT coalesce(%(now)s::timestamp, timezone('UTC', now())) AS now
),
input AS (
    SELECT clock.now, coalesce(
        %(scheduled_at)s::timestamp,
        clock.now + make_interval(secs => coalesce(%(schedule_in)s::double precision, 0))
    ) AS run_at
    FROM clock
),
inserted AS (
    INSERT INTO {prefix}.oban_jobs (
        state, queue, worker, args, meta, tags, priority, max_attempts, scheduled_at, inserted_at
    )
    SELECT
        CASE WHEN input.run_at > input.now THEN 'scheduled' ELSE 'available' END::{prefix}.oban_job_state,
        %(queue)s::text, %(worker)s::text, %(args)s::jsonb, %(meta)s::jsonb, %(tags)s::text[],
        %(priority)s::smallint, %(max_attempts)s::smallint, input.run_at, input.now
    FROM input
    RETURNING id, queue, state
)
SELECT id, CASE WHEN state = 'available'
    THEN pg_notify(%(channel)s, jsonb_build_object('queue', queue)::text)::text END AS notified
FROM inserted;
