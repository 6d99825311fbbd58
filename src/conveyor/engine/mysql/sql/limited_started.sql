-- The starts of a queue in its rate window (after %(window_start)s), on every node, by the partition
-- of the rate limit they count against ('' when the limit is not partitioned).
SELECT "partition", SUM(started) FROM {prefix}.conveyor_queue_starts
WHERE queue = %(queue)s AND started_at > %(window_start)s
GROUP BY "partition";
