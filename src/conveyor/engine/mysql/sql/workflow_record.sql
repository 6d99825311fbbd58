-- The record of a workflow whose steps were pruned, if any.
SELECT id, name, state, failed_step, counts, inserted_at, finished_at
FROM {prefix}.conveyor_workflows
WHERE id = %(workflow)s AND state IS NOT NULL;
