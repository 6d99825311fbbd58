-- Forget producers that are dead (by the same timeouts as rescue_jobs.sql) and own no executing
-- job any more. (An attempted_by another client wrote is read as JSON only when it is JSON.)
DELETE FROM oban_producers
WHERE updated_at < CASE WHEN {own_producer} THEN :dead_before ELSE :foreign_dead_before END
  AND uuid NOT IN (SELECT value FROM json_each(:live))
  AND NOT EXISTS (
    SELECT 1 FROM oban_jobs AS j
    WHERE j.state = 'executing'
      AND CASE WHEN json_valid(j.attempted_by) THEN j.attempted_by ->> 1 END = oban_producers.uuid
  );
