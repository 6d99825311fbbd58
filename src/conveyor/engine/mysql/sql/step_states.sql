-- The states of some steps of a workflow, by name (conveyor_workflow_step_names_index); a name
-- with no row is a step that no longer exists.
SELECT conveyor_step_name, state FROM {prefix}.oban_jobs
WHERE conveyor_workflow_id = %(workflow)s AND conveyor_step_name IN %(names)s;
