-- Forget producers that are dead and own no executing job any more.
DELETE FROM {prefix}.oban_producers AS p
WHERE p.updated_at < coalesce(%(now)s::timestamp, timezone('UTC', now())) - make_interval(secs => %(timeout)s)
  AND p.uuid::text <> ALL(%(live)s::text[])
  AND NOT EXISTS (
    SELECT 1 FROM {prefix}.oban_jobs AS j
    WHERE j.state = 'executing' AND j.attempted_by[2] = p.uuid::text
  );
