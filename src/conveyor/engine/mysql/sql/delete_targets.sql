-- The jobs a delete removes: matching, except executing ones (their node still owns them).
-- After the table, the index hint of by_ids.sql when the filter names ids.
SELECT id FROM {prefix}.oban_jobs {by_ids}
WHERE {filter}
  AND state <> 'executing'
ORDER BY id
LIMIT %(limit)s
FOR UPDATE;
