-- Claim up to the demand of available jobs of one queue whose global or rate limit is partitioned
-- (conveyor.limits.Partition): every partition (a worker, a tenant...) has the whole limit to itself.
-- It runs after lock_queue.sql in the same transaction, in a statement begun after the lock was
-- taken, so its counts see every claim committed before and no other claim of the queue runs until
-- this one commits (the argument of fetch_jobs.sql).
--   running:    executing jobs per partition of the global limit ({global_key} of a row);
--   started:    starts in the window per partition of the rate limit (recorded by earlier claims);
--   candidates: waiting jobs in priority, scheduled_at, id order, skipping partitions with no room
--               left, so a saturated partition never fills the scan and starves the others;
--   in_rate:    the candidates within their rate partition's room (place in line per partition);
--   in_both:    of those, the ones within their global partition's room;
--   claimed:     those in order, up to the demand.
-- A key is '' for a limit that is not partitioned (one partition: the queue). A job the global limit
-- holds back has still taken a place in its rate partition's line, so with both limits the claim may
-- take fewer than it could, never more; the next claim, with that partition full, takes the rest.
-- No FOR UPDATE on the candidates: claims of this queue are serialised by the lock, and the UPDATE
-- re-checks the state of each row it takes (a row cancelled meanwhile is skipped).
WITH clock AS (
    SELECT coalesce(%(now)s::timestamp, timezone('UTC', now())) AS now
),
stopping AS (
    SELECT {stopping_ids} AS ids
),
running AS (
    SELECT {global_key} AS pkey, count(*) AS n
    FROM {running_jobs} AS x
    WHERE %(global_limit)s::integer IS NOT NULL
    GROUP BY 1
),
started AS (
    SELECT r.partition AS pkey, sum(r.started) AS n
    FROM {prefix}.conveyor_queue_starts AS r
    WHERE %(rate_allowed)s::integer IS NOT NULL AND r.queue = %(queue)s
      AND r.started_at > (SELECT now FROM clock) - make_interval(secs => %(rate_period)s::double precision)
    GROUP BY 1
),
candidates AS (
    SELECT c.id, c.priority, c.scheduled_at, {global_key} AS gkey, {rate_key} AS rkey
    FROM {prefix}.oban_jobs AS c
    WHERE state = 'available' AND queue = %(queue)s AND attempt < max_attempts
      AND {lock_free}
      AND NOT EXISTS (
          SELECT 1 FROM running AS g WHERE g.pkey = {global_key} AND g.n >= %(global_limit)s::integer
      )
      AND NOT EXISTS (
          SELECT 1 FROM started AS s WHERE s.pkey = {rate_key} AND s.n >= %(rate_allowed)s::integer
      )
    ORDER BY priority, scheduled_at, id
    LIMIT %(scan)s
),
in_rate AS (
    SELECT k.*, row_number() OVER (PARTITION BY k.rkey ORDER BY k.priority, k.scheduled_at, k.id) AS rrank
    FROM candidates AS k
),
in_both AS (
    SELECT k.*, row_number() OVER (PARTITION BY k.gkey ORDER BY k.priority, k.scheduled_at, k.id) AS grank
    FROM in_rate AS k
    LEFT JOIN started AS s ON s.pkey = k.rkey
    WHERE %(rate_allowed)s::integer IS NULL OR k.rrank <= %(rate_allowed)s::integer - coalesce(s.n, 0)
),
claimed AS (
    SELECT k.id
    FROM in_both AS k
    LEFT JOIN running AS g ON g.pkey = k.gkey
    WHERE %(global_limit)s::integer IS NULL OR k.grank <= %(global_limit)s::integer - coalesce(g.n, 0)
    ORDER BY k.priority, k.scheduled_at, k.id
    LIMIT %(demand)s
),
updated AS (
    {claim_update}
){record_starts}
-- The claimed rows, in claim order, each ending with whether a partition's limit stopped the claim
-- (one row without a job when nothing was claimed): it took less than its demand while jobs of the
-- queue that no ordered lock holds are still waiting (the claimed ones still look so here).
SELECT u.*,
    CASE WHEN n.claimed < %(demand)s THEN EXISTS (
        SELECT 1 FROM {prefix}.oban_jobs AS c
        WHERE state = 'available' AND queue = %(queue)s AND attempt < max_attempts AND {lock_free}
          AND c.id <> ALL(ARRAY(SELECT id FROM updated))
    ) ELSE false END AS capped
FROM (SELECT count(*) AS claimed FROM updated) AS n
LEFT JOIN updated AS u ON true
ORDER BY u.priority, u.scheduled_at, u.id;
