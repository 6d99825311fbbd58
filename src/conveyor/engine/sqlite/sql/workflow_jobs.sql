-- The steps of one workflow, in id order (through conveyor_workflow_step_names_index).
SELECT {columns} FROM oban_jobs
WHERE (CASE WHEN json_valid(meta) THEN meta ->> 'workflow_id' IS NOT NULL ELSE 0 END)
  AND (CASE WHEN json_valid(meta) THEN meta ->> 'workflow_id' END) = :workflow
ORDER BY id;
