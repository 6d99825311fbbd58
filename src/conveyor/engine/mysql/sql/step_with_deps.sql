(conveyor_workflow_id IS NOT NULL AND JSON_TYPE(JSON_EXTRACT(meta, '$.deps')) = 'ARRAY' AND JSON_LENGTH(meta, '$.deps') > 0)
