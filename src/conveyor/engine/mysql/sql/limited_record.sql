-- Record a claim's starts for the rate limit: one row per partition it started jobs of.
INSERT INTO {prefix}.conveyor_queue_starts (queue, "partition", started_at, started)
VALUES (%s, %s, %s, %s);
