-- The queues that hold final jobs, found by skipping through the fetch index (a loose index scan)
-- instead of reading every row of a big table.
WITH RECURSIVE states(state) AS (
    SELECT 'completed' UNION ALL SELECT 'cancelled' UNION ALL SELECT 'discarded'
),
queues(state, queue) AS (
    SELECT s.state, (
        SELECT j.queue FROM oban_jobs AS j WHERE j.state = s.state ORDER BY j.queue LIMIT 1
    )
    FROM states AS s
    UNION ALL
    SELECT q.state, (
        SELECT j.queue FROM oban_jobs AS j
        WHERE j.state = q.state AND j.queue > q.queue ORDER BY j.queue LIMIT 1
    )
    FROM queues AS q
    WHERE q.queue IS NOT NULL
)
SELECT DISTINCT queue FROM queues WHERE queue IS NOT NULL;
