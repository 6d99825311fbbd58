-- The scheduled jobs among some that may wait for a message, locked: the engine reads each meta
-- (awaiting_signal.position against the messages in signals) and wakes those whose message came.
-- By the primary key only, whatever the table's size (ack_targets.sql says why).
SELECT id, queue, meta FROM {prefix}.oban_jobs FORCE INDEX (PRIMARY)
WHERE id IN %s AND state = 'scheduled'
FOR UPDATE;
