(SELECT x.state::text FROM {prefix}.oban_jobs AS x WHERE x.meta ? 'workflow_id' AND (x.meta ->> 'workflow_id') = {workflow} AND (x.meta ->> 'name') = {step} LIMIT 1)
