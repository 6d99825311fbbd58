-- insert_jobs.sql for a batch holding unique jobs. A unique job's record carries uniq_base (the hash
-- of what identifies it), uniq_period and uniq_states; its stored key is the base plus, with a
-- period, the number of the period-long slice of time (since the Unix epoch) holding the insert
-- clock, as conveyor/unique.py computes it. No two rows of the batch share a base. A row whose key a stored job holds in one of its unique states is not
-- inserted: ON CONFLICT names the unique index (v004_unique_jobs.sql) and touches that job instead,
-- which locks it until the end of the transaction and returns its id. (xmax = 0) tells a new row
-- from a touched one; only new available rows wake their queue. A concurrent insert of the same
-- key waits for this one to commit or roll back, so exactly one row survives.
WITH clock AS (
    SELECT coalesce(%(now)s::timestamp, timezone('UTC', now())) AS now
),
input AS (
    SELECT
        j.worker, j.queue, j.args, j.tags, j.priority, j.max_attempts, j.ord,
        coalesce(j.scheduled_at, clock.now + make_interval(secs => coalesce(j.schedule_in, 0))) AS run_at,
        CASE WHEN j.uniq_base IS NULL THEN j.meta ELSE j.meta || jsonb_build_object(
            'uniq_key', j.uniq_base || coalesce(
                '.' || floor(extract(epoch FROM clock.now)::double precision / j.uniq_period)::bigint, ''
            ),
            'uniq_states', j.uniq_states
        ) END AS meta
    FROM clock,
    ROWS FROM (
        jsonb_to_recordset(%(jobs)s::jsonb) AS (
            worker text, queue text, args jsonb, meta jsonb, tags text[], priority smallint,
            max_attempts smallint, scheduled_at timestamp, schedule_in double precision,
            uniq_base text, uniq_period double precision, uniq_states jsonb
        )
    ) WITH ORDINALITY AS j(
        worker, queue, args, meta, tags, priority, max_attempts, scheduled_at, schedule_in,
        uniq_base, uniq_period, uniq_states, ord
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
