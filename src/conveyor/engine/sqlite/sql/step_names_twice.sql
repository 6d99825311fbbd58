-- A step name stored more than once in a workflow (migration 10 cannot make names unique then).
SELECT meta ->> 'workflow_id', meta ->> 'name', count(*) FROM oban_jobs
WHERE (CASE WHEN json_valid(meta) THEN meta ->> 'workflow_id' IS NOT NULL ELSE 0 END)
  AND (CASE WHEN json_valid(meta) THEN meta ->> 'name' END) IS NOT NULL
GROUP BY 1, 2 HAVING count(*) > 1
LIMIT 1;
