-- One suspended step of a workflow, by name (through conveyor_workflow_step_names_index: one row at most).
SELECT id, meta FROM oban_jobs
WHERE (CASE WHEN json_valid(meta) THEN meta ->> 'workflow_id' IS NOT NULL ELSE 0 END)
  AND (CASE WHEN json_valid(meta) THEN meta ->> 'workflow_id' END) = :workflow
  AND (CASE WHEN json_valid(meta) THEN meta ->> 'name' END) = :name
  AND state = 'suspended';
