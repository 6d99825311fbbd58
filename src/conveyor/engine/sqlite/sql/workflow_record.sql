-- The record of a workflow whose steps were pruned (record_workflow.sql), if any.
SELECT id, name, state, failed_step, counts, inserted_at, finished_at
FROM conveyor_workflows
WHERE id = :workflow AND state IS NOT NULL;
