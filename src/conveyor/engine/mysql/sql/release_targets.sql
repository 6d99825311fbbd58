-- The executing rows some (id, attempt) pairs name, locked: release_jobs keeps the matching attempts.
-- By the primary key only, whatever the table's size (ack_targets.sql says why).
SELECT id, attempt, queue FROM {prefix}.oban_jobs FORCE INDEX (PRIMARY)
WHERE id IN %(ids)s AND state = 'executing'
FOR UPDATE;
