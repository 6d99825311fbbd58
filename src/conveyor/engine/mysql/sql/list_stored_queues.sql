SELECT name, opts, "only", updated_at FROM {prefix}.oban_queues ORDER BY name;
