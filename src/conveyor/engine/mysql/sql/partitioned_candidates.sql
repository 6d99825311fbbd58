-- The waiting jobs a claim under partitioned limits chooses from (conveyor.limits.Partition): up to
-- the scan size of available jobs of the queue in priority, scheduled_at, id order, each with the
-- key of the partition of the global limit and of the rate limit it counts against (limited.KEYS).
-- Jobs of partitions with no room left (the parameters global_full and rate_full: their keys, each
-- led by a value no key takes, so neither is ever empty) are left out, so a saturated partition
-- never fills the scan and starves the others. Runs under the queue's named lock; a plain read: the
-- ids chosen from it are locked afterwards (partitioned_take.sql), which checks each still waits.
SELECT c.id, {global_key}, {rate_key}
FROM {prefix}.oban_jobs AS c
WHERE c.state = 'available' AND c.queue = %(queue)s AND c.attempt < c.max_attempts
  AND {lock_free}
  AND {global_key} NOT IN %(global_full)s
  AND {rate_key} NOT IN %(rate_full)s
ORDER BY c.priority, c.scheduled_at, c.id
LIMIT %(scan)s;
