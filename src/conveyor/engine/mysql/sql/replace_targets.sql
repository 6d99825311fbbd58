-- The stored jobs a unique insert replaces fields of, locked: replacing.py computes their new values.
-- By the primary key only, whatever the table's size (ack_targets.sql says why).
SELECT id, state, attempt, args, meta, queue, tags, priority, max_attempts, scheduled_at, discarded_at,
       errors
FROM {prefix}.oban_jobs FORCE INDEX (PRIMARY) WHERE id IN %s FOR UPDATE;
