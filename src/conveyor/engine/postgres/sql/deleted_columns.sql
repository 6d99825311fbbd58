j.id, j.state, (j.meta ->> 'workflow_id') AS workflow, (j.meta ->> 'name') AS name,
    (j.meta ->> 'workflow_name') AS workflow_name, (j.meta ? 'run_if') AS run_if, j.inserted_at,
    coalesce(j.completed_at, j.cancelled_at, j.discarded_at) AS ended_at
