-- The jobs a retry makes available: matching, neither available nor executing, lowest ids first,
-- locked, with the unique key each carries in its meta.
SELECT id, queue, JSON_VALUE(meta, '$.uniq_key') FROM {prefix}.oban_jobs
WHERE {filter}
  AND state NOT IN ('available', 'executing')
ORDER BY id
LIMIT %(limit)s
FOR UPDATE;
