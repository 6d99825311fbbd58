-- Priority aging: available jobs that have waited since before %(cutoff)s with a priority above 0,
-- oldest first, a bounded batch, locked (age_priorities.sql moves them one step up).
SELECT id FROM {prefix}.oban_jobs
WHERE state = 'available' AND priority > 0 AND scheduled_at <= %(cutoff)s
ORDER BY scheduled_at, id
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;
