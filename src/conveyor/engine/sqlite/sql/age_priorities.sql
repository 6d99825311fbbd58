-- Priority aging: one step up (priority - 1) for available jobs that have waited since before
-- :cutoff (now less the aging threshold), oldest first, a bounded batch at a time.
UPDATE oban_jobs
SET priority = priority - 1
WHERE id IN (
    SELECT id FROM oban_jobs
    WHERE state = 'available' AND priority > 0 AND scheduled_at <= :cutoff
    ORDER BY scheduled_at, id
    LIMIT :limit
)
RETURNING id;
