INSERT INTO conveyor_queue_starts (queue, partition, started_at, started) VALUES (:queue, '', :now, :started);
