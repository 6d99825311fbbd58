-- Forget producers that are dead (by the same timeouts as rescue_jobs.sql) and own no executing
-- job any more.
DELETE FROM oban_producers
WHERE updated_at < CASE WHEN {own_producer} THEN :dead_before ELSE :foreign_dead_before END
  AND uuid NOT IN (SELECT value FROM json_each(:live))
  AND NOT EXISTS (
    SELECT 1 FROM oban_jobs AS j
    WHERE j.state = 'executing' AND j.attempted_by ->> 1 = oban_producers.uuid
  );
