-- Forget producers that are dead (by the same timeouts as rescue_jobs.sql) and own no executing
-- job any more.
DELETE FROM {prefix}.oban_producers AS p
WHERE p.updated_at < coalesce(%(now)s::timestamp, timezone('UTC', now())) - make_interval(secs => CASE
        WHEN p.meta ->> 'runtime' = 'conveyor' THEN %(timeout)s::float8
        ELSE %(foreign_timeout)s::float8
    END)
  AND p.uuid::text <> ALL(%(live)s::text[])
  AND NOT EXISTS (
    SELECT 1 FROM {prefix}.oban_jobs AS j
    WHERE j.state = 'executing' AND j.attempted_by[2] = p.uuid::text
  );
