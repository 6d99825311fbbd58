-- Store a job's inbox (and, for a job that let go of its slot to wait for a message, run it now).
UPDATE oban_jobs
SET meta = :meta,
    state = CASE WHEN :wake THEN 'available' ELSE state END,
    scheduled_at = CASE WHEN :wake THEN :now ELSE scheduled_at END
WHERE id = :id;
