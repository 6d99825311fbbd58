-- An ack batch's plain completions (no error, meta, schedule or snooze), in one statement: rows
-- ack_targets.sql read executing this attempt, locked. By the primary key only (ack_targets.sql).
UPDATE {prefix}.oban_jobs FORCE INDEX (PRIMARY)
SET state = 'completed', completed_at = %(now)s
WHERE id IN %(ids)s;
