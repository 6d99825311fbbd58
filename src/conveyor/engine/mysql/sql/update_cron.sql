UPDATE {prefix}.oban_crons
SET expression = %(expression)s, worker = %(worker)s, opts = %(opts)s, paused = %(paused)s,
    lock_version = lock_version + 1, updated_at = %(now)s
WHERE name = %(name)s;
