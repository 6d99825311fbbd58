-- Cancel every matching job that is not final. Executing jobs are marked cancelled too (their late
-- ack only applies to executing rows, so it cannot undo this) and their nodes are told to stop them
-- with Oban's "pkill" signal.
-- A run cannot always stop at once (a thread job only gets a flag), so each cancelled executing job
-- is listed in its producer's row (meta.stopping, by attempted_by[2]): until that producer's node
-- says the run is over (its heartbeat's holding list, upsert_producers.sql), the job keeps its
-- ordered lock and its global-limit slot (stopping_ids.sql), and a dead node's list goes with its
-- row when the leader deletes it. Only Conveyor's rows (meta.runtime): another runtime's beats would
-- never let go.
WITH clock AS (
    SELECT coalesce(%(now)s::timestamp, timezone('UTC', now())) AS now
),
targets AS (
    SELECT id, state FROM {prefix}.oban_jobs
    WHERE {filter}
      AND state NOT IN ('completed', 'discarded', 'cancelled')
    ORDER BY id
    LIMIT %(limit)s
    FOR UPDATE
),
cancelled AS (
    UPDATE {prefix}.oban_jobs AS j
    SET state = 'cancelled', cancelled_at = clock.now
    FROM targets, clock
    WHERE j.id = targets.id
    RETURNING j.id, targets.state AS previous_state, j.attempted_by[2] AS producer
),
stopping AS (
    UPDATE {prefix}.oban_producers AS p
    SET meta = jsonb_set(
        CASE WHEN jsonb_typeof(p.meta) = 'object' THEN p.meta ELSE '{}' END,
        '{stopping}',
        (CASE WHEN jsonb_typeof(p.meta -> 'stopping') = 'array' THEN p.meta -> 'stopping' ELSE '[]' END)
            || s.ids
    )
    FROM (
        SELECT producer, jsonb_agg(id) AS ids FROM cancelled
        WHERE previous_state = 'executing' AND producer IS NOT NULL
        GROUP BY producer
    ) AS s
    WHERE p.uuid::text = s.producer AND jsonb_typeof(p.meta) = 'object' AND p.meta ->> 'runtime' = 'conveyor'
),
signalled AS (
    SELECT pg_notify(%(signal_channel)s, jsonb_build_object('action', 'pkill', 'job_id', id)::text)
    FROM cancelled WHERE previous_state = 'executing'
),
ended AS (
    SELECT pg_notify(%(ended_channel)s, jsonb_build_object('ids', jsonb_agg(id))::text)
    FROM (SELECT id, (row_number() OVER () - 1) / 500 AS chunk FROM cancelled) AS numbered
    GROUP BY chunk
)
SELECT id, (SELECT count(*) FROM signalled) + (SELECT count(*) FROM ended) FROM cancelled ORDER BY id;
