-- The steps of one workflow, in id order (the order they were added in).
SELECT {columns} FROM {prefix}.oban_jobs
WHERE meta ? 'workflow_id' AND (meta ->> 'workflow_id') = %(workflow)s
ORDER BY id;
