-- Forget dead producers (as rescue_jobs judged them) that own no executing job any more.
DELETE FROM {prefix}.oban_producers
WHERE uuid IN %(dead)s
  AND NOT EXISTS (
    SELECT 1 FROM {prefix}.oban_jobs AS j
    WHERE j.state = 'executing' AND JSON_VALUE(j.attempted_by, '$[1]') = oban_producers.uuid
  );
