-- The running jobs some progress reports name, locked until their meta is written back: the engine
-- keeps those still executing the attempt that reported it (a late write never lands on a job that
-- ended or runs again) and sets meta.progress in Python.
-- By the primary key only, whatever the table's size (ack_targets.sql says why).
SELECT id, attempt, meta FROM {prefix}.oban_jobs FORCE INDEX (PRIMARY)
WHERE id IN %s AND state = 'executing'
FOR UPDATE;
