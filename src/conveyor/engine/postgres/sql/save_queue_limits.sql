-- Remember fleet-wide limits of a queue (`scale --persist`), as the scale signal carries them: the
-- keys given replace the ones kept (null lifts a limit), the others stay.
INSERT INTO {prefix}.conveyor_queue_limits AS s (name, queue, limits, updated_at)
VALUES (%(name)s, %(queue)s, %(limits)s::jsonb, timezone('UTC', now()))
ON CONFLICT (name, queue) DO UPDATE
SET limits = CASE WHEN jsonb_typeof(s.limits) = 'object' THEN s.limits ELSE '{}' END || excluded.limits,
    updated_at = excluded.updated_at;
