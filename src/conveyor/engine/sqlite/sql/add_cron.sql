-- A new stored entry; nothing (no row back) when one of that name exists.
INSERT INTO oban_crons (name, expression, worker, opts, paused)
VALUES (:name, :expression, :worker, :opts, :paused)
ON CONFLICT (name) DO NOTHING
RETURNING name;
