-- One rescued job: available again, or discarded when its attempts are used up, with the errors
-- entry and meta (rescued counted) rescue_jobs built.
UPDATE {prefix}.oban_jobs
SET state = %s, discarded_at = COALESCE(%s, discarded_at), errors = %s, meta = %s
WHERE id = %s;
