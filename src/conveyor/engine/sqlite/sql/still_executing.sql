-- Which of these attempts (job id, attempt) are still executing? A node asks to notice cancels it
-- did not hear, and jobs rescued from it (perhaps claimed again, by a later attempt) while it was
-- cut off from the database.
SELECT j.id
FROM oban_jobs AS j
JOIN json_each(:jobs) AS g ON j.id = g.value ->> 'id'
WHERE j.state = 'executing'
  AND j.attempt = g.value ->> 'attempt';
