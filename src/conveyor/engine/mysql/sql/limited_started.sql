-- The starts of a queue in its rate window (after %(window_start)s), on every node.
SELECT COALESCE(SUM(started), 0) FROM {prefix}.conveyor_queue_starts
WHERE queue = %(queue)s AND "partition" = '' AND started_at > %(window_start)s;
