-- Settle the suspended workflow steps that may now go on: those among %(ids)s, and those that depend
-- on the steps among %(ids)s (conveyor/workflow.py). A step goes on once none of its dependencies is
-- unfinished: it becomes available (scheduled when its time is still ahead), or cancelled when a
-- dependency was cancelled, discarded or is gone (deleted) and the step's policy does not ignore
-- that. Whatever calls this runs it after the changes it reports are committed (an ack, a cancel, an
-- insert), so of two steps finishing at once on two nodes, the settle that starts last sees both
-- (see Engine.settle_steps); the UPDATE takes only rows still suspended, so a step goes on once.
WITH clock AS (
    SELECT coalesce(%(now)s::timestamp, timezone('UTC', now())) AS now
),
given AS (
    SELECT g.meta ->> 'workflow_id' AS workflow, array_agg(g.id) AS ids,
        coalesce(array_agg(g.meta ->> 'name') FILTER (WHERE g.meta ->> 'name' IS NOT NULL), '{}') AS names,
        coalesce(array_agg(g.meta ->> 'name') FILTER (WHERE g.state::text = 'cancelled'), '{}') AS cancelled,
        coalesce(array_agg(g.meta ->> 'name') FILTER (WHERE g.state::text = 'discarded'), '{}') AS discarded
    FROM {prefix}.oban_jobs AS g
    WHERE g.id = ANY(%(ids)s::bigint[]) AND jsonb_typeof(g.meta) = 'object' AND g.meta ? 'workflow_id'
    GROUP BY 1
),
-- Each workflow's suspended steps are read once per settle, however many of its steps ended. A step
-- whose dependency just failed (and whose policy does not ignore it) is cancelled at once, without
-- waiting for its other dependencies ("early").
candidates AS (
    SELECT d.id, d.meta,
        (d.meta -> 'deps' ?| g.cancelled AND d.meta -> 'ignore_cancelled' IS DISTINCT FROM 'true'::jsonb)
        OR (d.meta -> 'deps' ?| g.discarded AND d.meta -> 'ignore_discarded' IS DISTINCT FROM 'true'::jsonb)
        AS early
    FROM given AS g
    JOIN {prefix}.oban_jobs AS d ON (d.meta ->> 'workflow_id') = g.workflow
    WHERE {waiting_step} AND jsonb_typeof(d.meta -> 'deps') = 'array'
      AND (d.id = ANY(g.ids) OR d.meta -> 'deps' ?| g.names)
){settle}
