SELECT name, expression, worker, opts, paused, inserted_at, updated_at FROM {prefix}.oban_crons ORDER BY name;
