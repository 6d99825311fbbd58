,
ready AS (
    SELECT DISTINCT c.id, c.meta, c.early
    FROM candidates AS c
    WHERE c.early OR NOT EXISTS (
        -- From the last dependency back: steps run roughly in the order they were added, so an
        -- unfinished one is usually met at once and a fan-in over thousands is not read whole.
        SELECT 1
        FROM generate_series(jsonb_array_length(c.meta -> 'deps') - 1, 0, -1) AS i
        JOIN {prefix}.oban_jobs AS x
          ON (x.meta ->> 'workflow_id') = (c.meta ->> 'workflow_id')
         AND (x.meta ->> 'name') = (c.meta -> 'deps' ->> i)
         AND x.meta ? 'workflow_id'
        WHERE x.state::text NOT IN ('completed', 'cancelled', 'discarded')
    )
),
verdicts AS (
    SELECT r.id, true AS failed, NULL::jsonb AS counts FROM ready AS r WHERE r.early
    UNION ALL
    SELECT v.id,
        (v.deleted > 0 AND v.meta -> 'ignore_deleted' IS DISTINCT FROM 'true'::jsonb)
        OR (v.cancelled > 0 AND v.meta -> 'ignore_cancelled' IS DISTINCT FROM 'true'::jsonb)
        OR (v.discarded > 0 AND v.meta -> 'ignore_discarded' IS DISTINCT FROM 'true'::jsonb)
        -- A step that runs only on some ending of its dependencies (batch callbacks) is cancelled
        -- when they did not end so.
        OR (v.meta ->> 'run_if' = 'any_failed' AND v.cancelled + v.discarded + v.deleted = 0)
        OR (v.meta ->> 'run_if' = 'any_discarded' AND v.discarded = 0)
        OR (v.meta ->> 'run_if' = 'any_cancelled' AND v.cancelled = 0) AS failed,
        jsonb_build_object(
            'completed', v.completed, 'cancelled', v.cancelled, 'discarded', v.discarded, 'deleted', v.deleted
        ) AS counts
    FROM (
        SELECT r.id, r.meta,
            count(dn.name) FILTER (WHERE x.state::text = 'completed') AS completed,
            count(dn.name) FILTER (WHERE x.state::text = 'cancelled') AS cancelled,
            count(dn.name) FILTER (WHERE x.state::text = 'discarded') AS discarded,
            count(dn.name) FILTER (WHERE x.id IS NULL) AS deleted
        FROM ready AS r
        LEFT JOIN LATERAL jsonb_array_elements_text(r.meta -> 'deps') AS dn(name) ON true
        LEFT JOIN {prefix}.oban_jobs AS x
          ON (x.meta ->> 'workflow_id') = (r.meta ->> 'workflow_id') AND (x.meta ->> 'name') = dn.name
         AND x.meta ? 'workflow_id'
        WHERE NOT r.early
        GROUP BY r.id, r.meta
    ) AS v
),
settled AS (
    UPDATE {prefix}.oban_jobs AS d
    SET state = (CASE
            WHEN v.failed THEN 'cancelled'
            WHEN d.scheduled_at > clock.now THEN 'scheduled'
            ELSE 'available'
        END)::{prefix}.oban_job_state,
        cancelled_at = CASE WHEN v.failed THEN clock.now ELSE d.cancelled_at END,
        -- How the dependencies ended, for the step to read (a batch callback's counts).
        meta = CASE WHEN v.counts IS NULL THEN d.meta ELSE d.meta || jsonb_build_object('deps_ended', v.counts) END
    FROM verdicts AS v, clock
    WHERE d.id = v.id AND {waiting_step}
    RETURNING d.id, d.state::text AS state, d.queue
),
notified AS (
    SELECT pg_notify(%(channel)s, jsonb_build_object('queue', queue)::text)
    FROM (SELECT DISTINCT queue FROM settled WHERE state = 'available') AS queues
)
SELECT id, state, (SELECT count(*) FROM notified) FROM settled ORDER BY id;
