-- Replace a stored entry's fields; no row back when it does not exist.
UPDATE oban_crons
SET expression = :expression, worker = :worker, opts = :opts, paused = :paused,
    lock_version = lock_version + 1, updated_at = strftime('%Y-%m-%d %H:%M:%f000', 'now')
WHERE name = :name
RETURNING name;
