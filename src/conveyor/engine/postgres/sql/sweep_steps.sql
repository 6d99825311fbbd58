-- Settle any suspended workflow steps that may go on (see settle_steps.sql), a bounded batch in id
-- order after %(after)s. The leader runs this on every stage: it settles what no ack settled (a node
-- died between its ack's commit and the settle, a step was cancelled or deleted by hand, another
-- client acked a step).
WITH clock AS (
    SELECT coalesce(%(now)s::timestamp, timezone('UTC', now())) AS now
),
candidates AS MATERIALIZED (
    SELECT d.id, d.meta, d.meta -> 'deps' AS deps, d.meta ->> 'workflow_id' AS workflow,
        EXISTS (
            SELECT 1 FROM jsonb_array_elements_text(d.meta -> 'deps') AS dn(name),
                LATERAL (SELECT {step_state_sweep} AS state) AS x
            WHERE (x.state = 'cancelled' AND d.meta -> 'ignore_cancelled' IS DISTINCT FROM 'true'::jsonb)
               OR (x.state = 'discarded' AND d.meta -> 'ignore_discarded' IS DISTINCT FROM 'true'::jsonb)
        ) AS early,
        false AS single, false AS cancelled, false AS discarded
    FROM {prefix}.oban_jobs AS d
    WHERE {waiting_step} AND jsonb_typeof(d.meta) = 'object' AND jsonb_typeof(d.meta -> 'deps') = 'array'
      AND d.id > %(after)s
    ORDER BY d.id
    LIMIT %(limit)s
){settle}
SELECT id, state, (SELECT count(*) FROM notified) FROM settled ORDER BY id;
