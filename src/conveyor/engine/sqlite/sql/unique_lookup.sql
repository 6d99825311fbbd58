-- The jobs that hold any of the given unique keys (a JSON array) in one of their unique states: the
-- requests with those keys are conflicts, not new jobs. The expression and the condition repeat the
-- index's (v004_unique_jobs.sql) word for word, so SQLite answers from it.
SELECT (CASE WHEN json_valid(meta) THEN meta ->> 'uniq_key' END), id
FROM oban_jobs
WHERE (CASE WHEN json_valid(meta) THEN meta ->> 'uniq_key' END) IN (SELECT value FROM json_each(?))
  AND {unique_predicate};
