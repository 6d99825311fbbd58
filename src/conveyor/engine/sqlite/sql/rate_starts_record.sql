INSERT INTO conveyor_rate_starts (queue, started_at, started) VALUES (:queue, :now, :started);
