-- Migration 10: a step name is unique within its workflow, kept so by the database (NULL names
-- never conflict). Names stored twice before this migration make it fail (schema names them).
CREATE UNIQUE INDEX conveyor_workflow_step_names_index
ON {prefix}.oban_jobs (conveyor_workflow_id, conveyor_step_name);
