-- Settle any suspended workflow steps that may go on (see settle_steps.sql), a bounded batch in id
-- order after %(after)s. The leader runs this on every stage: it settles what no ack settled (a node
-- died between its ack's commit and the settle, a step was cancelled or deleted by hand, another
-- client acked a step).
WITH clock AS (
    SELECT coalesce(%(now)s::timestamp, timezone('UTC', now())) AS now
),
candidates AS MATERIALIZED (
    SELECT c.id, c.meta -> 'deps' AS deps, c.meta ->> 'workflow_id' AS workflow,
        EXISTS (
            SELECT 1 FROM jsonb_array_elements_text(c.meta -> 'deps') AS dn(name),
                LATERAL (SELECT {step_state_sweep} AS state) AS x
            WHERE (x.state = 'cancelled' AND c.meta -> 'ignore_cancelled' IS DISTINCT FROM 'true'::jsonb)
               OR (x.state = 'discarded' AND c.meta -> 'ignore_discarded' IS DISTINCT FROM 'true'::jsonb)
        ) AS early,
        false AS single, false AS cancelled, false AS discarded, {step_policy}
    FROM (
        -- Each step's meta read out of its row once (step_meta.sql, see settle_steps.sql).
        SELECT d.id, {step_meta} AS meta
        FROM {prefix}.oban_jobs AS d
        WHERE {waiting_step} AND jsonb_typeof(d.meta) = 'object' AND d.id > %(after)s
        ORDER BY d.id
        LIMIT %(limit)s
    ) AS c
    WHERE jsonb_typeof(c.meta -> 'deps') = 'array'
){settle}
SELECT id, state, (SELECT count(*) FROM notified) FROM settled ORDER BY id;
