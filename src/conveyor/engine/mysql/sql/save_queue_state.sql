-- Remember a pause or a limit for a queue (NULL leaves that part as it was).
INSERT INTO {prefix}.conveyor_queue_states (name, queue, paused, local_limit, updated_at)
VALUES (%(name)s, %(queue)s, %(paused)s, %(limit)s, %(now)s)
ON DUPLICATE KEY UPDATE
    paused = COALESCE(VALUES(paused), paused),
    local_limit = COALESCE(VALUES(local_limit), local_limit),
    updated_at = VALUES(updated_at);
