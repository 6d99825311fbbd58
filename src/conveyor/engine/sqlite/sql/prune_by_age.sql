-- Delete one bounded batch of the final jobs one retention rule governs that ended before
-- :cutoff. Each arm reads the partial index of its state (an arm whose flag is false is skipped
-- as a whole); the batch keeps the write lock short while nodes keep working.
DELETE FROM oban_jobs
WHERE id IN (
    SELECT id FROM (
        SELECT j.id FROM oban_jobs AS j
        WHERE :completed AND j.state = 'completed' AND j.completed_at < :cutoff AND {governed}
          -- A finished workflow step stays while steps of its workflow wait: they read how it ended.
          AND NOT {spared}
        UNION ALL
        SELECT j.id FROM oban_jobs AS j
        WHERE :cancelled AND j.state = 'cancelled' AND j.cancelled_at < :cutoff AND {governed}
          AND NOT {spared}
        UNION ALL
        SELECT j.id FROM oban_jobs AS j
        WHERE :discarded AND j.state = 'discarded' AND j.discarded_at < :cutoff AND {governed}
          AND NOT {spared}
    )
    LIMIT :limit
)
RETURNING {deleted_columns};
