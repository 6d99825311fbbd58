-- The scheduled jobs among some that may wait for a message, locked: the engine reads each meta
-- (awaiting_signal.position against the messages in signals) and wakes those whose message came.
SELECT id, queue, meta FROM {prefix}.oban_jobs
WHERE id IN %s AND state = 'scheduled'
FOR UPDATE;
