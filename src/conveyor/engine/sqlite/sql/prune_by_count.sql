-- Keep the newest :keep (highest ids) of the final jobs one retention rule governs (or of the
-- whole table); delete one bounded batch of the older ones, whatever their age.
DELETE FROM oban_jobs
WHERE id IN (
    SELECT j.id FROM oban_jobs AS j
    WHERE ((:completed AND j.state = 'completed')
        OR (:cancelled AND j.state = 'cancelled')
        OR (:discarded AND j.state = 'discarded'))
      AND {governed}
      -- A finished workflow step stays while steps of its workflow wait: they read how it ended.
      AND NOT {spared}
    ORDER BY j.id DESC
    LIMIT :limit OFFSET :keep
)
RETURNING {deleted_columns};
