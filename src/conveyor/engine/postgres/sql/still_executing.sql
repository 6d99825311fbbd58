-- Which of these attempts (job id, attempt) are still executing, claimed by one of %(producers)s
-- (when given)? A node asks to notice cancels it did not hear, jobs rescued from it (perhaps claimed
-- again, by a later attempt) while it was cut off from the database, and claims that a crash of the
-- server undid and another producer took again with the same attempt.
WITH given AS (
    SELECT * FROM jsonb_to_recordset(%(jobs)s::jsonb) AS g(id bigint, attempt integer)
)
SELECT j.id
FROM {prefix}.oban_jobs AS j
JOIN given AS g ON g.id = j.id
WHERE j.id = ANY(ARRAY(SELECT id FROM given))
  AND j.state = 'executing'
  AND j.attempt = g.attempt
  AND (%(producers)s::text[] IS NULL OR j.attempted_by[2] = ANY(%(producers)s::text[]));
