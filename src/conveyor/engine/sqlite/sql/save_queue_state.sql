-- Remember a pause or a limit for a queue (NULL leaves that part as it was).
INSERT INTO conveyor_queue_states AS s (name, queue, paused, local_limit, updated_at)
VALUES (:name, :queue, :paused, :limit, :now)
ON CONFLICT (name, queue) DO UPDATE
SET paused = coalesce(excluded.paused, s.paused),
    local_limit = coalesce(excluded.local_limit, s.local_limit),
    updated_at = excluded.updated_at;
