-- The fleet-wide limits kept for a queue, as the scale signal carries them.
INSERT INTO {prefix}.conveyor_queue_limits (name, queue, limits, updated_at)
VALUES (%(name)s, %(queue)s, %(limits)s, %(now)s)
ON DUPLICATE KEY UPDATE limits = VALUES(limits), updated_at = VALUES(updated_at);
