-- Which of the given queues (a JSON array of names) hold jobs a fetch could claim: available, with
-- attempts left (as fetch_jobs.sql asks). A node's one poll for all its queues, made every poll
-- interval on the reader connection instead of a write transaction (a fetch) per queue. Each queue is
-- one probe of the fetch index that stops at its first row.
SELECT q.value
FROM json_each(:queues) AS q
WHERE EXISTS (
    SELECT 1
    FROM oban_jobs AS j
    WHERE j.state = 'available' AND j.queue = q.value AND j.attempt < j.max_attempts
);
