-- The jobs hold_jobs.sql will hold suspended, locked first (an UPDATE returns no rows).
-- By the primary key only, whatever the table's size (ack_targets.sql says why).
SELECT id FROM {prefix}.oban_jobs FORCE INDEX (PRIMARY)
WHERE id IN %s AND state IN ('available', 'scheduled', 'cancelled', 'discarded')
FOR UPDATE;
