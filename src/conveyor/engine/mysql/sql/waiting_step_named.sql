-- One suspended step of a workflow, by name (conveyor_workflow_step_names_index: one row at most),
-- locked until it is settled: a concurrent settle of the same step waits, then sees it settled.
SELECT id, meta, queue, scheduled_at FROM {prefix}.oban_jobs
WHERE conveyor_workflow_id = %(workflow)s AND conveyor_step_name = %(name)s AND state = 'suspended'
FOR UPDATE;
