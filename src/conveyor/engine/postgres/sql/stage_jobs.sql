-- Make due scheduled and retryable jobs available, a bounded batch at a time, and wake the
-- producers of their queues on every node.
--
-- The locked ids reach the UPDATE as an array, looked up through the primary key whatever the
-- estimates. Joined to the CTE instead, the planner hashed the whole table whenever it thought
-- that cheaper: on a table of 100,000 rows each batch of 5,000 spent 35 of its 92 ms reading
-- every row, and staging 100,000 due jobs took 2.3 s (0.9 s through the array; 0.95 s on a table
-- of 10 million rows: benchmarks/run.py large-tables). The rows are locked by this statement:
-- their state cannot change between the two steps.
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
    WHERE j.id = ANY(ARRAY(SELECT id FROM due))
    RETURNING j.queue
),
queues AS (
    SELECT queue, count(*) AS staged FROM staged GROUP BY queue
)
SELECT queue, staged, pg_notify(%(insert_channel)s, jsonb_build_object('queue', queue)::text)
FROM queues;
