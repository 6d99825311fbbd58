-- A node's one poll, as one read: which of the awake queues (a JSON array) hold jobs a fetch could
-- claim (as waiting_queues.sql), and the persisted states and limits of the node's queues (a JSON
-- array) for the instance named, so a pause or limit whose signal the node missed still reaches it.
SELECT 'waiting' AS kind, q.queue AS queue, NULL AS paused, NULL AS local_limit, NULL AS limits
FROM JSON_TABLE(%(awake)s, '$[*]' COLUMNS (queue VARCHAR(255) PATH '$')) AS q
WHERE EXISTS (
    SELECT 1 FROM {prefix}.oban_jobs AS j
    WHERE j.state = 'available' AND j.queue = q.queue AND j.attempt < j.max_attempts
)
UNION ALL
SELECT 'state', s.queue, s.paused, s.local_limit, NULL
FROM {prefix}.conveyor_queue_states AS s
WHERE s.name = %(name)s AND s.queue IN (SELECT queue FROM JSON_TABLE(%(queues)s, '$[*]' COLUMNS (queue VARCHAR(255) PATH '$')) AS n)
UNION ALL
SELECT 'limits', l.queue, NULL, NULL, l.limits
FROM {prefix}.conveyor_queue_limits AS l
WHERE l.name = %(name)s AND l.queue IN (SELECT queue FROM JSON_TABLE(%(queues)s, '$[*]' COLUMNS (queue VARCHAR(255) PATH '$')) AS n);
