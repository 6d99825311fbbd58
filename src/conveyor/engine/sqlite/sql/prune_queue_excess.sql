-- Keep at most :keep final jobs of one queue (the newest); delete one bounded batch beyond that.
DELETE FROM oban_jobs
WHERE id IN (
    SELECT id FROM oban_jobs
    WHERE queue = :queue AND state IN ('completed', 'cancelled', 'discarded')
    ORDER BY id DESC
    LIMIT :limit OFFSET :keep
);
