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
    SELECT r.id, true AS failed FROM ready AS r WHERE r.early
    UNION ALL
    SELECT r.id,
        (count(x.id) < count(dn.name) AND r.meta -> 'ignore_deleted' IS DISTINCT FROM 'true'::jsonb)
        OR (coalesce(bool_or(x.state::text = 'cancelled'), false)
            AND r.meta -> 'ignore_cancelled' IS DISTINCT FROM 'true'::jsonb)
        OR (coalesce(bool_or(x.state::text = 'discarded'), false)
            AND r.meta -> 'ignore_discarded' IS DISTINCT FROM 'true'::jsonb) AS failed
    FROM ready AS r
    LEFT JOIN LATERAL jsonb_array_elements_text(r.meta -> 'deps') AS dn(name) ON true
    LEFT JOIN {prefix}.oban_jobs AS x
      ON (x.meta ->> 'workflow_id') = (r.meta ->> 'workflow_id') AND (x.meta ->> 'name') = dn.name
     AND x.meta ? 'workflow_id'
    WHERE NOT r.early
    GROUP BY r.id, r.meta
),
settled AS (
    UPDATE {prefix}.oban_jobs AS d
    SET state = (CASE
            WHEN v.failed THEN 'cancelled'
            WHEN d.scheduled_at > clock.now THEN 'scheduled'
            ELSE 'available'
        END)::{prefix}.oban_job_state,
        cancelled_at = CASE WHEN v.failed THEN clock.now ELSE d.cancelled_at END
    FROM verdicts AS v, clock
    WHERE d.id = v.id AND {waiting_step}
    RETURNING d.id, d.state::text AS state, d.queue
),
notified AS (
    SELECT pg_notify(%(channel)s, jsonb_build_object('queue', queue)::text)
    FROM (SELECT DISTINCT queue FROM settled WHERE state = 'available') AS queues
)
SELECT id, state, (SELECT count(*) FROM notified) FROM settled ORDER BY id;
