-- Store the progress of running jobs (meta.progress, replaced whole: the node sends every field it
-- knows), only while each is still executing the attempt that reported it: a late write never
-- lands on a job that ended or runs again. Only an object is merged into (nested CASEs: json_type
-- fails on malformed text).
WITH entries AS (
    SELECT value ->> 'id' AS id, value ->> 'attempt' AS attempt, value ->> 'progress' AS progress
    FROM json_each(:entries)
)
UPDATE oban_jobs AS j
SET meta = json_set(
    CASE WHEN json_valid(j.meta) THEN CASE WHEN json_type(j.meta) = 'object' THEN j.meta ELSE '{}' END ELSE '{}' END,
    '$.progress', json(e.progress))
FROM entries AS e
WHERE j.id = e.id
  AND +j.state = 'executing'
  AND j.attempt = e.attempt
RETURNING id;
