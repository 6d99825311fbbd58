-- Due scheduled and retryable jobs, earliest first, a bounded batch, locked (another stager skips
-- them): stage_jobs.sql makes them available.
SELECT id, queue FROM {prefix}.oban_jobs
WHERE state IN ('scheduled', 'retryable') AND scheduled_at <= %(now)s
ORDER BY scheduled_at, id
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;
