-- Make matching jobs available now. A job that used up its attempts gets one more, and the
-- timestamps of its previous ending are cleared, as Oban does.
UPDATE oban_jobs
SET state = 'available',
    scheduled_at = :now,
    max_attempts = max(max_attempts, attempt + 1),
    completed_at = NULL,
    cancelled_at = NULL,
    discarded_at = NULL
WHERE id IN (
    SELECT id FROM oban_jobs
    WHERE {filter}
      AND state NOT IN ('available', 'executing')
    ORDER BY id
    LIMIT :limit
)
RETURNING id, queue;
