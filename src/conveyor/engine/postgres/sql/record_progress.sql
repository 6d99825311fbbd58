-- Store the progress of running jobs (meta.progress, replaced whole: the node sends every field it
-- knows), only while each is still executing the attempt that reported it: a late write never
-- lands on a job that ended or runs again. The ids reach the UPDATE as an array: primary key only.
WITH entries AS (
    SELECT * FROM jsonb_to_recordset(%(entries)s::jsonb) AS e(id bigint, attempt smallint, progress jsonb)
)
UPDATE {prefix}.oban_jobs AS j
SET meta = (CASE WHEN jsonb_typeof(j.meta) = 'object' THEN j.meta ELSE '{}' END)
    || jsonb_build_object('progress', e.progress)
FROM entries AS e
WHERE j.id = ANY(ARRAY(SELECT id FROM entries))
  AND j.id = e.id
  AND j.state::text = 'executing'
  AND j.attempt = e.attempt
RETURNING j.id;
