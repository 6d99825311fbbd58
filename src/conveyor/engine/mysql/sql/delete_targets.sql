-- The jobs a delete removes: matching, except executing ones (their node still owns them).
SELECT id FROM {prefix}.oban_jobs
WHERE {filter}
  AND state <> 'executing'
ORDER BY id
LIMIT %(limit)s
FOR UPDATE;
