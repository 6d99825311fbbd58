-- Make due scheduled and retryable jobs available, a bounded batch at a time, and wake the
-- producers of their queues on every node.
WITH clock AS (
    SELECT coalesce(%(now)s::timestamp, timezone('UTC', now())) AS now
),
due AS (
    SELECT id
    FROM {prefix}.oban_jobs, clock
    WHERE state IN ('scheduled', 'retryable') AND scheduled_at <= clock.now
    ORDER BY scheduled_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
staged AS (
    UPDATE {prefix}.oban_jobs AS j
    SET state = 'available'
    FROM due
    WHERE j.id = due.id
    RETURNING j.queue
),
queues AS (
    SELECT queue, count(*) AS staged FROM staged GROUP BY queue
)
SELECT queue, staged, pg_notify(%(insert_channel)s, jsonb_build_object('queue', queue)::text)
FROM queues;
