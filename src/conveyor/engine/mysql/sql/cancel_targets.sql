-- The jobs a cancel ends: matching and not final yet, lowest ids first, locked; with the producer
-- (attempted_by's second item) that runs the executing ones.
-- After the table, the index hint of by_ids.sql when the filter names ids.
SELECT id, state, JSON_VALUE(attempted_by, '$[1]') FROM {prefix}.oban_jobs {by_ids}
WHERE {filter}
  AND state NOT IN ('completed', 'discarded', 'cancelled')
ORDER BY id
LIMIT %(limit)s
FOR UPDATE;
