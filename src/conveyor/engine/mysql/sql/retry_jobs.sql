-- Make the jobs retry_targets.sql locked available now. A job that used up its attempts gets one
-- more, and the times of its previous ending are cleared, as Oban does.
-- By the primary key only, whatever the table's size (ack_targets.sql says why).
UPDATE {prefix}.oban_jobs FORCE INDEX (PRIMARY)
SET state = 'available',
    scheduled_at = %(now)s,
    max_attempts = GREATEST(max_attempts, attempt + 1),
    completed_at = NULL,
    cancelled_at = NULL,
    discarded_at = NULL
WHERE id IN %(ids)s;
