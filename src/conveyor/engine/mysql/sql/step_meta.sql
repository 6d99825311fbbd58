-- The meta of one step of a workflow, by name, locked until the engine writes it back.
SELECT id, meta FROM {prefix}.oban_jobs
WHERE conveyor_workflow_id = %(workflow)s AND conveyor_step_name = %(name)s
FOR UPDATE;
