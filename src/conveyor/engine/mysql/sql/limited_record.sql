-- Record a claim's starts for the rate limit, and forget the rows well past any window.
INSERT INTO {prefix}.conveyor_queue_starts (queue, "partition", started_at, started)
VALUES (%(queue)s, '', %(now)s, %(started)s);
