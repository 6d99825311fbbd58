UPDATE oban_jobs
SET state = 'executing',
    attempt = attempt + 1,
    attempted_at = :now,
    attempted_by = json_array(:node, :producer),
    meta = {claimed_meta}
WHERE id IN (SELECT id FROM claimed)
RETURNING {columns}
