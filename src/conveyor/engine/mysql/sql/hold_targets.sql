-- The jobs hold_jobs.sql will hold suspended, locked first (an UPDATE returns no rows).
SELECT id FROM {prefix}.oban_jobs
WHERE id IN %s AND state IN ('available', 'scheduled', 'cancelled', 'discarded')
FOR UPDATE;
