-- The executing rows some (id, attempt) pairs name, locked: release_jobs keeps the matching attempts.
SELECT id, attempt, queue FROM {prefix}.oban_jobs
WHERE id IN %(ids)s AND state = 'executing'
FOR UPDATE;
