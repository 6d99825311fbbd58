UPDATE {prefix}.oban_jobs
SET args = %s, meta = %s, queue = %s, tags = %s, priority = %s, max_attempts = %s, scheduled_at = %s,
    discarded_at = %s, errors = %s, state = %s
WHERE id = %s;
