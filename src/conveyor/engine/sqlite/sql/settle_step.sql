-- Let one suspended step go on: available (scheduled when its time is ahead), or cancelled.
UPDATE oban_jobs
SET state = CASE WHEN :failed THEN 'cancelled' WHEN scheduled_at > :now THEN 'scheduled' ELSE 'available' END,
    cancelled_at = CASE WHEN :failed THEN :now ELSE cancelled_at END
WHERE id = :id AND state = 'suspended'
RETURNING state, queue;
