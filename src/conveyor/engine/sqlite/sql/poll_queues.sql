-- A node's one poll, every poll interval, as one read on the reader connection: which of the awake
-- queues (:awake, a JSON array of names) hold jobs a fetch could claim (as waiting_queues.sql), and
-- the persisted states of the node's queues (:queues) for the instance :name (as
-- load_queue_states.sql and load_queue_limits.sql), so a pause or limit whose signal the node missed
-- still reaches it.
SELECT 'waiting' AS kind, q.value AS queue, NULL AS paused, NULL AS local_limit, NULL AS limits
FROM json_each(:awake) AS q
WHERE EXISTS (
    SELECT 1
    FROM oban_jobs AS j
    WHERE j.state = 'available' AND j.queue = q.value AND j.attempt < j.max_attempts
)
UNION ALL
SELECT 'state', s.queue, s.paused, s.local_limit, NULL
FROM conveyor_queue_states AS s
WHERE s.name = :name AND s.queue IN (SELECT value FROM json_each(:queues))
UNION ALL
SELECT 'limits', l.queue, NULL, NULL, l.limits
FROM conveyor_queue_limits AS l
WHERE l.name = :name AND l.queue IN (SELECT value FROM json_each(:queues));
