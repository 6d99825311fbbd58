-- Delete one bounded batch of final jobs that ended before :cutoff. Each arm reads the partial
-- index of its state; the batch keeps the write lock short while nodes keep working.
DELETE FROM oban_jobs
WHERE id IN (
    SELECT id FROM oban_jobs WHERE state = 'completed' AND completed_at < :cutoff
    UNION ALL
    SELECT id FROM oban_jobs WHERE state = 'cancelled' AND cancelled_at < :cutoff
    UNION ALL
    SELECT id FROM oban_jobs WHERE state = 'discarded' AND discarded_at < :cutoff
    LIMIT :limit
);
