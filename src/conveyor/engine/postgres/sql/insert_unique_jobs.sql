-- insert_jobs.sql for a batch holding unique jobs. Their meta already carries uniq_key and
-- uniq_states (computed from the insert clock, read first and passed as %(now)s), and no two rows of
-- the batch share a key. A row whose key a stored job holds in one of its unique states is not
-- inserted: ON CONFLICT names the unique index (v004_unique_jobs.sql) and touches that job instead,
-- which locks it until the end of the transaction and returns its id. (xmax = 0) tells a new row
-- from a touched one; only new available rows wake their queue. A concurrent insert of the same
-- key waits for this one to commit or roll back, so exactly one row survives.
WITH clock AS (
    SELECT %(now)s::timestamp AS now
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
written AS (
    INSERT INTO {prefix}.oban_jobs AS o (
        state, queue, worker, args, meta, tags, priority, max_attempts, scheduled_at, inserted_at
    )
    SELECT
        CASE WHEN input.run_at > clock.now THEN 'scheduled' ELSE 'available' END::{prefix}.oban_job_state,
        input.queue, input.worker, input.args, input.meta, input.tags, input.priority,
        input.max_attempts, input.run_at, clock.now
    FROM input, clock
    ORDER BY input.ord
    ON CONFLICT ((meta ->> 'uniq_key')) WHERE {unique_predicate}
    DO UPDATE SET meta = o.meta
    RETURNING o.id, o.queue, o.state, o.xmax = 0 AS inserted, o.meta ->> 'uniq_key' AS uniq_key
),
notified AS (
    SELECT pg_notify(%(channel)s, jsonb_build_object('queue', queue)::text)
    FROM (SELECT DISTINCT queue FROM written WHERE inserted AND state = 'available') AS queues
)
SELECT id, inserted, uniq_key, (SELECT count(*) FROM notified) AS notified FROM written ORDER BY id;
