-- Replace a stored entry's fields; no row back when it does not exist.
UPDATE {prefix}.oban_crons
SET expression = %(expression)s, worker = %(worker)s, opts = %(opts)s::jsonb, paused = %(paused)s,
    lock_version = lock_version + 1, updated_at = timezone('UTC', now())
WHERE name = %(name)s
RETURNING name;
