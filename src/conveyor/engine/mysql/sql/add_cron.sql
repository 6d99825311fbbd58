-- A new stored cron entry; an entry of that name already there is left alone (affected rows 0).
INSERT INTO {prefix}.oban_crons (name, expression, worker, opts, paused, inserted_at, updated_at)
VALUES (%(name)s, %(expression)s, %(worker)s, %(opts)s, %(paused)s, %(now)s, %(now)s)
ON DUPLICATE KEY UPDATE name = name;
