-- The jobs a cancel ends: matching and not final yet, lowest ids first, locked.
SELECT id, state FROM {prefix}.oban_jobs
WHERE {filter}
  AND state NOT IN ('completed', 'discarded', 'cancelled')
ORDER BY id
LIMIT %(limit)s
FOR UPDATE;
