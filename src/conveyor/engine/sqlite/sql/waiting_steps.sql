-- The suspended steps of one workflow (through conveyor_workflow_waiting_index).
SELECT id, meta, scheduled_at, queue FROM oban_jobs
WHERE state = 'suspended' AND (CASE WHEN json_valid(meta) THEN meta ->> 'workflow_id' END) = :workflow;
