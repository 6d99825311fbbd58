-- Claim up to the demand of available jobs of one queue whose global or rate limit is partitioned
-- (conveyor.limits.Partition): every partition has the whole limit to itself. It runs in the same
-- BEGIN IMMEDIATE transaction as the rest of the claim, so its counts see every process's claims.
-- The steps and their argument are those of the PostgreSQL file of the same name: running jobs per
-- partition of the global limit, starts in the window per partition of the rate limit, waiting jobs
-- of partitions with room (a saturated partition never fills the scan), those within their rate
-- partition's room, of those the ones within their global partition's room, in order, up to the demand.
WITH running AS (
    SELECT {global_key} AS pkey, count(*) AS n
    FROM {running_jobs} AS x
    WHERE :global_limit IS NOT NULL
    GROUP BY 1
),
started AS (
    SELECT partition AS pkey, sum(started) AS n
    FROM conveyor_queue_starts
    WHERE :rate_allowed IS NOT NULL AND queue = :queue AND started_at > :window_start
    GROUP BY 1
),
candidates AS (
    SELECT c.id, c.priority, c.scheduled_at, {global_key} AS gkey, {rate_key} AS rkey
    FROM oban_jobs AS c
    WHERE state = 'available' AND queue = :queue AND attempt < max_attempts
      AND {lock_free}
      AND NOT EXISTS (SELECT 1 FROM running AS g WHERE g.pkey = {global_key} AND g.n >= :global_limit)
      AND NOT EXISTS (SELECT 1 FROM started AS s WHERE s.pkey = {rate_key} AND s.n >= :rate_allowed)
    ORDER BY priority, scheduled_at, id
    LIMIT :scan
),
in_rate AS (
    SELECT k.*, row_number() OVER (PARTITION BY k.rkey ORDER BY k.priority, k.scheduled_at, k.id) AS rrank
    FROM candidates AS k
),
in_both AS (
    SELECT k.*, row_number() OVER (PARTITION BY k.gkey ORDER BY k.priority, k.scheduled_at, k.id) AS grank
    FROM in_rate AS k
    LEFT JOIN started AS s ON s.pkey = k.rkey
    WHERE :rate_allowed IS NULL OR k.rrank <= :rate_allowed - coalesce(s.n, 0)
),
claimed AS (
    SELECT k.id
    FROM in_both AS k
    LEFT JOIN running AS g ON g.pkey = k.gkey
    WHERE :global_limit IS NULL OR k.grank <= :global_limit - coalesce(g.n, 0)
    ORDER BY k.priority, k.scheduled_at, k.id
    LIMIT :demand
)
{claim_update};
