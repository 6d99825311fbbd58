SELECT {columns}
FROM oban_jobs
WHERE {filter}
ORDER BY id DESC
LIMIT :limit;
