UPDATE {prefix}.oban_jobs AS j
SET state = 'executing',
    attempt = j.attempt + 1,
    attempted_at = clock.now,
    attempted_by = ARRAY[%(node)s::text, %(producer)s::text],
    meta = {claimed_meta}
FROM clock
WHERE j.id = ANY(ARRAY(SELECT id FROM claimed))
  AND j.state::text = 'available' AND j.attempt < j.max_attempts
RETURNING {job_columns}
