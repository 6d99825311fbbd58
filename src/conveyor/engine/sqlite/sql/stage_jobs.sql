-- Make due scheduled and retryable jobs available, a bounded batch at a time. The engine counts
-- the returned queues and wakes their producers on every node.
UPDATE oban_jobs
SET state = 'available'
WHERE id IN (
    SELECT id FROM oban_jobs INDEXED BY oban_jobs_staging_index
    WHERE state IN ('scheduled', 'retryable') AND scheduled_at <= :now
    ORDER BY scheduled_at, id
    LIMIT :limit
)
RETURNING queue;
