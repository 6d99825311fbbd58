-- The jobs of every queue in every state, with the time the oldest available job of each queue
-- became available. Every part walks the fetch index (state, queue, priority, scheduled_at, id):
--
-- * pairs: the (state, queue) pairs that hold jobs, one index probe each (a loose index scan).
-- * estimate: the planner's row estimate for each pair (conveyor_count_estimate, which plans with
--   the pair as constants so the joint statistics of migration 9 apply).
-- * counted: an exact count, from the index alone, of the pairs expected smallest first while their
--   expected rows add up to %(budget)s at most; a pair found to hold more than %(budget)s stops
--   there. A pair left uncounted (or stopped) keeps its estimate: the engine marks it estimated.
-- * oldest: per available pair, the earliest scheduled_at of each priority (one probe each; the
--   index orders by priority first), the least of them.
WITH RECURSIVE clock AS (
    SELECT coalesce(%(now)s::timestamp, timezone('UTC', now())) AS now
),
pairs AS (
    (SELECT j.state, j.queue FROM {prefix}.oban_jobs AS j ORDER BY j.state, j.queue LIMIT 1)
    UNION ALL
    SELECT later.state, later.queue
    FROM pairs AS p, LATERAL (
        SELECT j.state, j.queue FROM {prefix}.oban_jobs AS j
        WHERE (j.state, j.queue) > (p.state, p.queue)
        ORDER BY j.state, j.queue
        LIMIT 1
    ) AS later
),
estimated AS (
    SELECT p.state, p.queue, greatest({prefix}.conveyor_count_estimate(p.state::text, p.queue), 1) AS estimate
    FROM pairs AS p
),
ranked AS (
    SELECT e.*, sum(e.estimate) OVER (ORDER BY e.estimate, e.state, e.queue) AS running
    FROM estimated AS e
)
SELECT
    r.state::text,
    r.queue,
    r.estimate,
    CASE WHEN r.running <= %(budget)s THEN (
        SELECT count(*) FROM (
            SELECT 1 FROM {prefix}.oban_jobs AS j
            WHERE j.state = r.state AND j.queue = r.queue
            LIMIT %(budget)s + 1
        ) AS capped
    ) END AS counted,
    CASE WHEN r.state::text = 'available' THEN (
        WITH RECURSIVE priorities AS (
            (
                SELECT j.priority, j.scheduled_at FROM {prefix}.oban_jobs AS j
                WHERE j.state = r.state AND j.queue = r.queue
                ORDER BY j.priority, j.scheduled_at
                LIMIT 1
            )
            UNION ALL
            SELECT later.priority, later.scheduled_at
            FROM priorities AS p, LATERAL (
                SELECT j.priority, j.scheduled_at FROM {prefix}.oban_jobs AS j
                WHERE j.state = r.state AND j.queue = r.queue AND j.priority > p.priority
                ORDER BY j.priority, j.scheduled_at
                LIMIT 1
            ) AS later
        )
        SELECT min(scheduled_at) FROM priorities
    ) END AT TIME ZONE 'UTC' AS oldest_available_at,
    clock.now AT TIME ZONE 'UTC' AS measured_at
FROM ranked AS r, clock
ORDER BY r.queue, r.state;
