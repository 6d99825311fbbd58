id, state,
    (CASE WHEN json_valid(meta) THEN meta ->> 'workflow_id' END) AS workflow,
    (CASE WHEN json_valid(meta) THEN meta ->> 'name' END) AS name,
    (CASE WHEN json_valid(meta) THEN meta ->> 'workflow_name' END) AS workflow_name,
    (CASE WHEN json_valid(meta) THEN json_type(meta, '$.run_if') IS NOT NULL ELSE 0 END) AS run_if,
    inserted_at,
    coalesce(completed_at, cancelled_at, discarded_at) AS ended_at
