SELECT {columns}
FROM {prefix}.oban_jobs
WHERE {filter}
ORDER BY id DESC
LIMIT %(limit)s;
