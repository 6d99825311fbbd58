-- Jobs that let go of their slot to wait for a message (meta.awaiting_signal.position) while that
-- message was being sent: run them again now. Nested CASEs: json_type fails on malformed text.
UPDATE oban_jobs AS j
SET state = 'available', scheduled_at = :now
WHERE j.id IN (SELECT value FROM json_each(:ids))
  AND j.state = 'scheduled'
  AND CASE WHEN json_valid(j.meta) THEN CASE
      WHEN json_type(j.meta, '$.awaiting_signal.position') IN ('integer', 'real')
          AND json_type(j.meta, '$.signals') = 'array'
      THEN (j.meta ->> '$.awaiting_signal.position') < (
          SELECT count(*) FROM json_each(j.meta, '$.signals') AS m WHERE m.type = 'object')
      ELSE 0 END
  ELSE 0 END
RETURNING id, queue;
