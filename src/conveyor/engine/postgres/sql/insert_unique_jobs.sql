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
-- The states name the stored jobs that count as twins, whatever state a new row starts in. A row
-- starting in a state outside its own states stays out of the unique index, so ON CONFLICT cannot
-- see its twin: then the twin is looked up (through the same index) and the row is not inserted.
looked AS (
    SELECT input.*, s.id AS stored_id
    FROM input CROSS JOIN clock
    LEFT JOIN LATERAL (
        SELECT id FROM {prefix}.oban_jobs
        WHERE (meta ->> 'uniq_key') = input.uniq_key AND {unique_predicate}
        LIMIT 1
    ) AS s ON NOT (input.uniq_states ? (CASE WHEN input.run_at > clock.now THEN 'scheduled' ELSE 'available' END))
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
    FROM looked AS input, clock
    WHERE input.stored_id IS NULL
    ORDER BY input.uniq_key COLLATE "C" NULLS LAST, input.ord
    ON CONFLICT ((meta ->> 'uniq_key')) WHERE {unique_predicate}
    DO UPDATE SET meta = o.meta
    RETURNING o.id, o.queue, o.state, o.xmax = 0 AS inserted, o.meta ->> 'uniq_key' AS uniq_key
),
notified AS (
    SELECT pg_notify(%(channel)s, jsonb_build_object('queue', queue)::text)
    FROM (SELECT DISTINCT queue FROM written WHERE inserted AND state = 'available') AS queues
)
SELECT id, inserted, uniq_key, (SELECT count(*) FROM notified) AS notified FROM written
UNION ALL
SELECT stored_id, false, uniq_key, 0 FROM looked WHERE stored_id IS NOT NULL
ORDER BY id;
