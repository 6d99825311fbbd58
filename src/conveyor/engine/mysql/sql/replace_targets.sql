-- The stored jobs a unique insert replaces fields of, locked: replacing.py computes their new values.
SELECT id, state, attempt, args, meta, queue, tags, priority, max_attempts, scheduled_at, discarded_at,
       errors
FROM {prefix}.oban_jobs WHERE id IN %s FOR UPDATE;
