-- The workflow, dependents and state of the given jobs that are workflow steps (migration 8's
-- virtual column holds the workflow of a meta that names one, NULL for any other meta).
SELECT id, conveyor_workflow_id, JSON_QUERY(meta, '$.dependents'), state FROM {prefix}.oban_jobs
WHERE id IN %(ids)s AND conveyor_workflow_id IS NOT NULL;
