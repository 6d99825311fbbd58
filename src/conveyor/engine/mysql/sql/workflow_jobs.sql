-- The steps of one workflow, in id order (conveyor_workflow_waiting_index).
SELECT {columns} FROM {prefix}.oban_jobs
WHERE conveyor_workflow_id = %(workflow)s
ORDER BY id;
