-- Orphaned executing jobs, lowest ids first, a bounded batch, locked (skipping rows another
-- transaction holds): those of a dead producer (%(dead)s), and, as a backstop, those with no
-- producer row at all that began before %(backstop_before)s (dated by scheduled_at when another
-- client left attempted_at NULL: an attempt cannot begin before its job was due). attempted_by
-- holds [node, producer uuid]; another client's junk there reads as NULL. Read through an index that
-- starts with the state, whatever the table's size: in id order (the optimizer's choice on a small
-- table) the read would lock every row it passes, available jobs among them, which claims then skip.
SELECT j.id, j.queue, j.attempt, j.max_attempts, j.meta, j.errors,
       JSON_VALUE(j.attempted_by, '$[0]') AS node,
       JSON_VALUE(j.attempted_by, '$[1]') AS producer
FROM {prefix}.oban_jobs AS j FORCE INDEX (oban_jobs_staging_index)
WHERE j.state = 'executing'
  AND (
    JSON_VALUE(j.attempted_by, '$[1]') IN %(dead)s
    OR (
        COALESCE(j.attempted_at, j.scheduled_at) < %(backstop_before)s
        AND NOT EXISTS (
            SELECT 1 FROM {prefix}.oban_producers AS p
            WHERE p.uuid = JSON_VALUE(j.attempted_by, '$[1]')
        )
    )
  )
ORDER BY j.id
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;
