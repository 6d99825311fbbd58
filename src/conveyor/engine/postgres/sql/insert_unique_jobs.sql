-- insert_jobs.sql for a batch holding unique jobs. A unique job's record carries uniq_base (the hash
-- of what identifies it), uniq_period and uniq_states; its stored key is the base plus, with a
-- period, the number of the period-long slice of time (since the Unix epoch) holding the insert
-- clock, as conveyor/unique.py computes it. No two rows of the batch share a base. A row whose key a
-- stored job holds in one of its unique states is not inserted: ON CONFLICT names the unique index
-- (v004_unique_jobs.sql) and touches that job instead, which locks it until the end of the
-- transaction and returns its id. (xmax = 0) tells a new row from a touched one; only new available
-- rows wake their queue. A concurrent insert of the same key waits for this one to commit or roll
-- back, so exactly one row survives.
--
-- Keys are claimed in one order, the keys' own (byte order, as Python sorts them), whatever the
-- batch's: two transactions claiming the same keys then wait for each other at their first common
-- key and never deadlock. Ids still follow the batch's order: a record's own id (reserved by the
-- caller, insert_reserve.sql) or the next of the sequence, taken in input order before the rows are
-- sorted; a row that meets a twin leaves its id unused, as a default value would.
WITH clock AS (
    SELECT coalesce(%(now)s::timestamp, timezone('UTC', now())) AS now
),
input AS MATERIALIZED (
    SELECT
        coalesce(j.id, nextval((SELECT pg_get_serial_sequence(
            format('%%I.oban_jobs', {prefix_literal}), 'id'))::regclass)) AS id,
        j.worker, j.queue, j.args, j.tags, j.priority, j.max_attempts, j.ord,
        coalesce(j.scheduled_at, clock.now + make_interval(secs => coalesce(j.schedule_in, 0))) AS run_at,
        j.uniq_base || coalesce(
            '.' || floor(extract(epoch FROM clock.now)::double precision / j.uniq_period)::bigint, ''
        ) AS uniq_key,
        j.uniq_states, j.meta
    FROM clock,
    ROWS FROM (
        jsonb_to_recordset(%(jobs)s::jsonb) AS (
            id bigint, worker text, queue text, args jsonb, meta jsonb, tags text[], priority smallint,
            max_attempts smallint, scheduled_at timestamp, schedule_in double precision,
            uniq_base text, uniq_period double precision, uniq_states jsonb
        )
    ) WITH ORDINALITY AS j(
        id, worker, queue, args, meta, tags, priority, max_attempts, scheduled_at, schedule_in,
        uniq_base, uniq_period, uniq_states, ord
    )
    ORDER BY j.ord  -- the ids are drawn after the sort: in input order
),
written AS (
    INSERT INTO {prefix}.oban_jobs AS o (
        id, state, queue, worker, args, meta, tags, priority, max_attempts, scheduled_at, inserted_at
    )
    OVERRIDING SYSTEM VALUE
    SELECT
        input.id,
        CASE WHEN input.run_at > clock.now THEN 'scheduled' ELSE 'available' END::{prefix}.oban_job_state,
        input.queue, input.worker, input.args,
        CASE WHEN input.uniq_key IS NULL THEN input.meta ELSE input.meta || jsonb_build_object(
            'uniq_key', input.uniq_key, 'uniq_states', input.uniq_states
        ) END,
        input.tags, input.priority, input.max_attempts, input.run_at, clock.now
    FROM input, clock
    ORDER BY input.uniq_key COLLATE "C" NULLS LAST, input.ord
    ON CONFLICT ((meta ->> 'uniq_key')) WHERE {unique_predicate}
    DO UPDATE SET meta = o.meta
    RETURNING o.id, o.queue, o.state, o.xmax = 0 AS inserted, o.meta ->> 'uniq_key' AS uniq_key
),
notified AS (
    SELECT pg_notify(%(channel)s, jsonb_build_object('queue', queue)::text)
    FROM (SELECT DISTINCT queue FROM written WHERE inserted AND state = 'available') AS queues
)
SELECT id, inserted, uniq_key, (SELECT count(*) FROM notified) AS notified FROM written ORDER BY id;
