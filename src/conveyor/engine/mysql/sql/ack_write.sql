-- One applied ack: the row was read executing this attempt under ack_targets.sql's lock.
UPDATE {prefix}.oban_jobs
SET state = %s,
    completed_at = CASE WHEN %s = 'completed' THEN %s ELSE completed_at END,
    discarded_at = CASE WHEN %s = 'discarded' THEN %s ELSE discarded_at END,
    cancelled_at = CASE WHEN %s = 'cancelled' THEN %s ELSE cancelled_at END,
    scheduled_at = COALESCE(%s, scheduled_at),
    attempt = attempt - %s,
    errors = %s,
    meta = %s
WHERE id = %s;
