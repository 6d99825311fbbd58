-- Which of the given queues hold jobs a fetch could claim: available, with attempts left (as
-- fetch_jobs.sql asks). A node's one poll for all its queues, made every poll interval instead of a
-- fetch per queue. Each queue is one probe of the fetch index (state, queue, ...) that stops at its
-- first row, so the cost follows the number of queues, not the size of the table.
SELECT q.queue
FROM unnest(%(queues)s::text[]) AS q(queue)
WHERE EXISTS (
    SELECT 1
    FROM {prefix}.oban_jobs AS j
    WHERE j.state = 'available' AND j.queue = q.queue AND j.attempt < j.max_attempts
);
