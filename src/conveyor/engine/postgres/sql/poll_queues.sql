-- A node's one poll, every poll interval, as one statement (one transaction: an idle node's cost is
-- counted in transactions): which of the awake queues hold jobs a fetch could claim (as
-- waiting_queues.sql), and the persisted states of the node's queues (as load_queue_states.sql and
-- load_queue_limits.sql), so a pause or limit whose signal the node missed still reaches it. The
-- state tables hold a row per persisted queue: their primary keys (name, queue) find them.
SELECT 'waiting' AS kind, q.queue, NULL::boolean AS paused, NULL::integer AS local_limit, NULL::jsonb AS limits
FROM unnest(%(awake)s::text[]) AS q(queue)
WHERE EXISTS (
    SELECT 1
    FROM {prefix}.oban_jobs AS j
    WHERE j.state = 'available' AND j.queue = q.queue AND j.attempt < j.max_attempts
)
UNION ALL
SELECT 'state', s.queue, s.paused, s.local_limit, NULL
FROM {prefix}.conveyor_queue_states AS s
WHERE s.name = %(name)s AND s.queue = ANY(%(queues)s::text[])
UNION ALL
SELECT 'limits', l.queue, NULL, NULL, l.limits
FROM {prefix}.conveyor_queue_limits AS l
WHERE l.name = %(name)s AND l.queue = ANY(%(queues)s::text[]);
