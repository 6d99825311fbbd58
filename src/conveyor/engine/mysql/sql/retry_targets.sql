-- The jobs a retry makes available: matching, neither available nor executing, lowest ids first,
-- locked, with the unique key each carries in its meta, and whether it is a workflow step with
-- dependencies (held suspended rather than made available; a suspended one waits already and is
-- left alone).
-- After the table, the index hint of by_ids.sql when the filter names ids.
SELECT id, queue, JSON_VALUE(meta, '$.uniq_key'), {step_with_deps} FROM {prefix}.oban_jobs {by_ids}
WHERE {filter}
  AND state NOT IN ('available', 'executing')
  AND NOT (state = 'suspended' AND {step_with_deps})
ORDER BY id
LIMIT %(limit)s
FOR UPDATE;
