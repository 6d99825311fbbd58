-- Which of the given queues (a JSON array) hold a job a fetch could claim: one probe of the fetch
-- index per queue, whatever the size of the table.
SELECT q.queue
FROM JSON_TABLE(%(queues)s, '$[*]' COLUMNS (queue VARCHAR(255) PATH '$')) AS q
WHERE EXISTS (
    SELECT 1 FROM {prefix}.oban_jobs AS j
    WHERE j.state = 'available' AND j.queue = q.queue AND j.attempt < j.max_attempts
);
