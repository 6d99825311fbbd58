-- Make matching jobs available now. A job that used up its attempts gets one more, and the
-- timestamps of its previous ending are cleared, as Oban does.
WITH clock AS (
    SELECT coalesce(%(now)s::timestamp, timezone('UTC', now())) AS now
),
targets AS (
    SELECT id FROM {prefix}.oban_jobs
    WHERE {filter}
      AND state NOT IN ('available', 'executing')
    ORDER BY id
    LIMIT %(limit)s
    FOR UPDATE
),
retried AS (
    UPDATE {prefix}.oban_jobs AS j
    SET state = 'available',
        scheduled_at = clock.now,
        max_attempts = greatest(j.max_attempts, j.attempt + 1),
        completed_at = NULL,
        cancelled_at = NULL,
        discarded_at = NULL
    FROM targets, clock
    WHERE j.id = targets.id
    RETURNING j.id, j.queue
),
notified AS (
    SELECT pg_notify(%(insert_channel)s, jsonb_build_object('queue', queue)::text)
    FROM (SELECT DISTINCT queue FROM retried) AS queues
)
SELECT id, (SELECT count(*) FROM notified) FROM retried ORDER BY id;
