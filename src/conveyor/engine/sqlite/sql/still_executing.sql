-- Which of these attempts (job id, attempt) are still executing, claimed by one of :producers (a
-- JSON array, when given)? A node asks to notice cancels it did not hear, jobs rescued from it
-- (perhaps claimed again, by a later attempt) while it was cut off from the database, and claims
-- another producer took again with the same attempt. An attempted_by that is not JSON (another
-- writer's junk) matches no producer, instead of failing the question for every job.
SELECT j.id
FROM oban_jobs AS j
JOIN json_each(:jobs) AS g ON j.id = g.value ->> 'id'
WHERE j.state = 'executing'
  AND j.attempt = g.value ->> 'attempt'
  AND (:producers IS NULL OR CASE WHEN json_valid(j.attempted_by) THEN j.attempted_by ->> 1 END
      IN (SELECT value FROM json_each(:producers)));
