-- Which of the given unique keys a job other than the given ones holds in one of its unique states.
SELECT conveyor_uniq_key FROM {prefix}.oban_jobs
WHERE conveyor_uniq_key IN %(keys)s AND id NOT IN %(ids)s
FOR UPDATE;
