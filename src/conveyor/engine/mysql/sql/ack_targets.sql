-- The rows some acks name that are executing, locked until the acks are written: the engine keeps
-- those whose attempt (and claiming node) match, and merges errors and meta in Python.
SELECT id, attempt, attempted_by, errors, meta FROM {prefix}.oban_jobs
WHERE id IN %(ids)s AND state = 'executing'
FOR UPDATE;
