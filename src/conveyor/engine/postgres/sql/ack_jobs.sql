-- Write the end of many attempts in one statement. An ack applies only while its row is still
-- executing the same attempt: a rescued and re-claimed job is never overwritten by a stale ack.
-- Given %(node)s, also only while the row's claim is that node's (attempted_by[1]): after a claim
-- that a crash of the server undid (synchronous_commit off), another node may hold the same attempt,
-- and the first run's ack must not end that node's run.
--
-- Each row must be found through the primary key, whatever the estimates (the engine runs this with
-- a generic plan): the ids reach the UPDATE as an array, and the state is compared as text so the
-- (state, queue, ...) index is no candidate. A bitmap scan of that index for 'executing' visits every
-- executing entry the table ever had until a vacuum (bitmap scans never mark dead entries), so an
-- ack of 20 jobs took over 5 ms after 50,000 jobs instead of half a millisecond.
--
-- Appending a.error to j.errors depends on the column's type: a JSON array where oban-py or Conveyor
-- created the table (append_error_jsonb.sql), a jsonb[] array where Elixir Oban did
-- (append_error_array.sql). The engine reads the type from the catalog and composes the matching
-- fragment. Each fragment fails on the other type rather than write a wrong value: on jsonb[],
-- `errors || jsonb_build_array(...)` would quietly append a nested array.
--
-- The ids written are announced on the "ended" channel, 500 to a notification (PostgreSQL caps a
-- payload at 8000 bytes), for whoever waits for one of these jobs (Conveyor.wait).
WITH clock AS (
    SELECT coalesce(%(now)s::timestamp, timezone('UTC', now())) AS now
),
acks AS (
    SELECT *
    FROM jsonb_to_recordset(%(acks)s::jsonb) AS a(
        id bigint, attempt smallint, state text, schedule_in double precision,
        error jsonb, meta jsonb, snoozed boolean
    )
),
acked AS (
UPDATE {prefix}.oban_jobs AS j
SET state = a.state::{prefix}.oban_job_state,
    completed_at = CASE WHEN a.state = 'completed' THEN clock.now ELSE j.completed_at END,
    discarded_at = CASE WHEN a.state = 'discarded' THEN clock.now ELSE j.discarded_at END,
    cancelled_at = CASE WHEN a.state = 'cancelled' THEN clock.now ELSE j.cancelled_at END,
    scheduled_at = CASE
        WHEN a.schedule_in IS NULL THEN j.scheduled_at
        ELSE clock.now + make_interval(secs => a.schedule_in)
    END,
    attempt = CASE WHEN a.snoozed THEN j.attempt - 1 ELSE j.attempt END,
    errors = CASE WHEN a.error IS NULL THEN j.errors ELSE {append_error} END,
    -- meta is free-form: NULL in a table Elixir Oban created (NULL || x would drop the update), and
    -- any JSON another client wrote. Only an object is merged into, and only a number counted up:
    -- one row's junk must never make the statement, and so every ack of its batch, fail.
    meta = CASE
        -- A snooze makes the job scheduled again. A unique job not unique while executing (the
        -- 'scheduled' group) would then re-enter the unique index, where a twin inserted meanwhile
        -- may hold its key: it drops its markers instead (see conveyor/unique.py).
        WHEN a.snoozed THEN (((CASE WHEN jsonb_typeof(j.meta) = 'object' THEN j.meta ELSE '{}' END)
            || jsonb_build_object('snoozed', 1 + CASE
                WHEN jsonb_typeof(j.meta -> 'snoozed') = 'number'
                THEN least(greatest(floor((j.meta -> 'snoozed')::numeric), 0), 1000000000)::int
                ELSE 0
            END)) - CASE
                WHEN j.meta ? 'uniq_key' AND NOT coalesce(j.meta -> 'uniq_states' ? 'executing', false)
                THEN ARRAY['uniq_key', 'uniq_states']
                ELSE ARRAY[]::text[]
            END) || coalesce(a.meta, '{}')
        WHEN a.meta IS NULL THEN j.meta
        ELSE (CASE WHEN jsonb_typeof(j.meta) = 'object' THEN j.meta ELSE '{}' END) || a.meta
    END
FROM acks AS a, clock
WHERE j.id = ANY(ARRAY(SELECT id FROM acks))
  AND j.id = a.id
  AND j.state::text = 'executing'
  AND j.attempt = a.attempt
  AND (%(node)s::text IS NULL OR j.attempted_by[1] = %(node)s::text)
-- A workflow step that ended and lists dependents: they may go on now (settle_steps.sql).
RETURNING j.id, a.state AS state, CASE
        WHEN a.state IN ('completed', 'cancelled', 'discarded') AND jsonb_typeof(j.meta) = 'object'
            AND j.meta ? 'workflow_id' AND jsonb_typeof(j.meta -> 'dependents') = 'array'
            AND jsonb_array_length(j.meta -> 'dependents') > 0
        THEN j.meta -> 'dependents'
    END AS dependents,
    j.meta ->> 'workflow_id' AS workflow
),
ended AS (
    SELECT pg_notify(%(ended_channel)s, jsonb_build_object('ids', jsonb_agg(id))::text)
    FROM (SELECT id, (row_number() OVER () - 1) / 500 AS chunk FROM acked) AS numbered
    GROUP BY chunk
)
-- The second column says which ended steps to settle: of the steps of one workflow that ended
-- alike and list the same dependents (a fan-in's leaves), one is enough, as the settle reads every
-- dependency's state itself (the one given tells it only how a dependency ended). The lists are
-- compared by digest: sorting long lists of names would compare them whole, again and again.
-- The sub-select runs (once) as the first row is returned, so the notifications always go out.
SELECT id, id IN (
        SELECT min(id) FROM acked WHERE dependents IS NOT NULL GROUP BY workflow, state, md5(dependents::text)
    ) AS settle
FROM acked
WHERE (SELECT count(*) FROM ended) >= 0;
