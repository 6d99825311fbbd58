-- A page of suspended workflow steps after :after, in id order.
SELECT id, meta ->> 'workflow_id' FROM oban_jobs
WHERE state = 'suspended' AND (CASE WHEN json_valid(meta) THEN (CASE WHEN json_type(meta) = 'object' THEN meta ->> 'workflow_id' IS NOT NULL ELSE 0 END) ELSE 0 END) AND id > :after
ORDER BY id LIMIT :limit;
