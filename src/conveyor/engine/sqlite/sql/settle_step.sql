-- Let one suspended step go on: available (scheduled when its time is ahead), or cancelled.
UPDATE oban_jobs
SET state = CASE WHEN :failed THEN 'cancelled' WHEN scheduled_at > :now THEN 'scheduled' ELSE 'available' END,
    cancelled_at = CASE WHEN :failed THEN :now ELSE cancelled_at END,
    -- How the dependencies ended, for the step to read (a batch callback's counts).
    meta = CASE WHEN :counts IS NULL THEN meta ELSE json_set(meta, '$.deps_ended', json(:counts)) END
WHERE id = :id AND state = 'suspended'
RETURNING state, queue;
