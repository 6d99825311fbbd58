-- A page of suspended workflow steps after %(after)s, in id order (the fetch index leads by state).
SELECT id FROM {prefix}.oban_jobs
WHERE state = 'suspended' AND conveyor_workflow_id IS NOT NULL AND id > %(after)s
ORDER BY id
LIMIT %(limit)s;
