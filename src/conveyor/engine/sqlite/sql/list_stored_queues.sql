SELECT name, opts, "only", updated_at FROM oban_queues ORDER BY name;
