-- The queues that hold final jobs, found by skipping through the fetch index (a loose index
-- scan) instead of reading every row of a big table.
WITH RECURSIVE states(state) AS (
    VALUES ('completed'::{prefix}.oban_job_state), ('cancelled'), ('discarded')
),
queues AS (
    SELECT s.state, (
        SELECT j.queue FROM {prefix}.oban_jobs AS j WHERE j.state = s.state ORDER BY j.queue LIMIT 1
    ) AS queue
    FROM states AS s
    UNION ALL
    SELECT q.state, (
        SELECT j.queue FROM {prefix}.oban_jobs AS j
        WHERE j.state = q.state AND j.queue > q.queue ORDER BY j.queue LIMIT 1
    )
    FROM queues AS q
    WHERE q.queue IS NOT NULL
)
SELECT DISTINCT queue FROM queues WHERE queue IS NOT NULL;
