-- Forget producers that are dead and own no executing job any more.
DELETE FROM oban_producers
WHERE updated_at < :dead_before
  AND uuid NOT IN (SELECT value FROM json_each(:live))
  AND NOT EXISTS (
    SELECT 1 FROM oban_jobs AS j
    WHERE j.state = 'executing' AND j.attempted_by ->> 1 = oban_producers.uuid
  );
