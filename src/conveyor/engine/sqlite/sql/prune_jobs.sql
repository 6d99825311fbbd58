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
)
-- A finished workflow step stays while steps of its workflow wait: they read how it ended.
AND NOT EXISTS (
    SELECT 1 FROM oban_jobs AS d
    WHERE d.state = 'suspended'
      AND (CASE WHEN json_valid(d.meta) THEN d.meta ->> 'workflow_id' END)
          = (CASE WHEN json_valid(oban_jobs.meta) THEN oban_jobs.meta ->> 'workflow_id' END)
);
