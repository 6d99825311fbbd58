-- Store a job's inbox (and, for a job that let go of its slot to wait for a message, run it now).
UPDATE {prefix}.oban_jobs
SET meta = %(meta)s,
    state = CASE WHEN %(wake)s THEN 'available' ELSE state END,
    scheduled_at = CASE WHEN %(wake)s THEN %(now)s ELSE scheduled_at END
WHERE id = %(id)s;
