SELECT name, expression, worker, opts, paused, inserted_at, updated_at FROM oban_crons ORDER BY name;
