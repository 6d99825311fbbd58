-- Settle the suspended workflow steps that may now go on: those among %(ids)s, and those that depend
-- on the steps among %(ids)s (conveyor/workflow.py; each step lists its dependents by name). A step
-- goes on once none of its dependencies is unfinished: it becomes available (scheduled when its time is still ahead), or cancelled when a
-- dependency was cancelled, discarded or is gone (deleted) and the step's policy does not ignore
-- that. Whatever calls this runs it after the changes it reports are committed (an ack, a cancel, an
-- insert), so of two steps finishing at once on two nodes, the settle that starts last sees both
-- (see Engine.settle_steps); the UPDATE takes only rows still suspended, so a step goes on once.
--
-- One statement settles the dependents at positions skip to skip + take - 1 of each given step's
-- list (and the given steps that wait themselves, with the first slice): a fan-out's first steps
-- are committed, and run, while the statements for the rest are still to come. The third column
-- of every row says whether a given step lists more dependents; when nothing was settled the one
-- row has no id.
WITH clock AS (
    SELECT coalesce(%(now)s::timestamp, timezone('UTC', now())) AS now
),
given AS (
    SELECT g.id, g.meta ->> 'workflow_id' AS workflow, g.meta ->> 'name' AS name, g.state,
        CASE WHEN jsonb_typeof(g.meta -> 'dependents') = 'array' THEN g.meta -> 'dependents' ELSE '[]' END
            AS dependents
    FROM (
        -- Each meta read out of its row once (step_meta.sql, see candidates): a fan-out's lists
        -- thousands of dependents.
        SELECT d.id, d.state::text AS state, {step_meta} AS meta
        FROM {prefix}.oban_jobs AS d
        -- Found by id alone: written as `meta ? 'workflow_id'`, the test would let the planner AND
        -- the pkey with the partial index of every step (migration 8), read whole for each settle.
        WHERE d.id = ANY(%(ids)s::bigint[])
        OFFSET 0
    ) AS g
    WHERE jsonb_typeof(g.meta) = 'object' AND jsonb_typeof(g.meta -> 'workflow_id') IS NOT NULL
),
-- The names in this slice of the given steps' dependents, each once per workflow (a fan-in's
-- dependencies all name it), with whether one of those steps was cancelled or discarded, and the
-- first and last (by name) of those that ended: a step whose only dependency is one of them needs
-- no more lookups (two are enough to tell a fan-out's steps; anything else is looked up).
named AS (
    SELECT g.workflow, g.dependents ->> i AS name,
        bool_or(g.state = 'cancelled') AS cancelled, bool_or(g.state = 'discarded') AS discarded,
        min(g.name) FILTER (WHERE g.state IN ('completed', 'cancelled', 'discarded')) AS ended_first,
        max(g.name) FILTER (WHERE g.state IN ('completed', 'cancelled', 'discarded')) AS ended_last
    FROM given AS g
    CROSS JOIN LATERAL generate_series(
        %(skip)s::int, least(jsonb_array_length(g.dependents), %(skip)s::int + %(take)s::int) - 1
    ) AS i
    GROUP BY 1, 2
),
-- The waiting steps so named, each found by name (one index lookup: the unique index of migration 10
-- holds one row per name); and the given steps that wait
-- themselves.
edges AS (
    SELECT s.id, n.cancelled, n.discarded, n.ended_first, n.ended_last
    FROM named AS n
    -- No state in the lookup: with one, the planner may take the waiting-steps index and read the
    -- whole workflow per name.
    CROSS JOIN LATERAL (
        SELECT d.id, d.state::text AS state FROM {prefix}.oban_jobs AS d
        WHERE d.meta ? 'workflow_id' AND (d.meta ->> 'workflow_id') = n.workflow AND (d.meta ->> 'name') = n.name
        LIMIT 1
    ) AS s
    WHERE s.state = 'suspended'
    UNION ALL
    SELECT d.id, false, false, NULL, NULL
    FROM given AS g JOIN {prefix}.oban_jobs AS d ON d.id = g.id
    WHERE {waiting_step} AND %(skip)s::int = 0
),
-- What each waiting step met: whether a dependency among the given steps failed, and which of its
-- dependencies ended now. MATERIALIZED: computed once, never again per candidate.
met AS MATERIALIZED (
    SELECT id, bool_or(cancelled) AS cancelled, bool_or(discarded) AS discarded,
        min(ended_first) AS ended_first, max(ended_last) AS ended_last
    FROM edges
    GROUP BY id
),
-- A step whose dependency just failed (and whose policy does not ignore it) is cancelled at once,
-- without waiting for its other dependencies ("early").
candidates AS MATERIALIZED (
    SELECT c.id, c.meta -> 'deps' AS deps, c.meta ->> 'workflow_id' AS workflow,
        (c.cancelled AND c.meta -> 'ignore_cancelled' IS DISTINCT FROM 'true'::jsonb)
        OR (c.discarded AND c.meta -> 'ignore_discarded' IS DISTINCT FROM 'true'::jsonb) AS early,
        -- Its only dependency is a given step that ended (a fan-out's steps): settled from that
        -- step's state alone.
        coalesce(
            jsonb_array_length(c.meta -> 'deps') = 1
                AND (c.meta -> 'deps' ->> 0) IN (c.ended_first, c.ended_last),
            false
        ) AS single,
        c.cancelled, c.discarded, {step_policy}
    FROM (
        -- Each step's meta is read out of its row once (step_meta.sql: `|| '{}'` hands back the
        -- value itself, decompressed): a fan-in's is large, stored compressed out of line, and each
        -- `->` on the row's own column would decompress all of it again (0.1 ms for 10,000 names).
        -- OFFSET 0 keeps this a subquery of its own, so the columns above read its result.
        -- Through the primary key whatever the estimates (an array, as in fetch_jobs.sql).
        SELECT e.*, {step_meta} AS meta
        FROM met AS e
        JOIN {prefix}.oban_jobs AS d ON d.id = e.id AND d.id = ANY(ARRAY(SELECT id FROM met))
        OFFSET 0
    ) AS c
    WHERE jsonb_typeof(c.meta -> 'deps') = 'array'
){settle}
SELECT s.id, s.state, m.more, (SELECT count(*) FROM notified)
FROM (
    SELECT coalesce(max(jsonb_array_length(dependents)), 0) > %(skip)s::int + %(take)s::int AS more
    FROM given
) AS m
LEFT JOIN settled AS s ON true
ORDER BY s.id;
