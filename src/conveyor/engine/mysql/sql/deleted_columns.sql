j.id, j.state, j.conveyor_workflow_id AS workflow, j.conveyor_step_name AS name,
    JSON_VALUE(j.meta, '$.workflow_name') AS workflow_name,
    COALESCE(JSON_CONTAINS_PATH(j.meta, 'one', '$.run_if'), 0) AS run_if, j.inserted_at,
    COALESCE(j.completed_at, j.cancelled_at, j.discarded_at) AS ended_at
