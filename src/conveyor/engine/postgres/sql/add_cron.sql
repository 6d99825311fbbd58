-- A new stored entry; nothing (no row back) when one of that name exists.
INSERT INTO {prefix}.oban_crons (name, expression, worker, opts, paused)
VALUES (%(name)s, %(expression)s, %(worker)s, %(opts)s::jsonb, %(paused)s)
ON CONFLICT (name) DO NOTHING
RETURNING name;
