-- Claim up to %(demand)s available jobs of one queue, in priority, scheduled_at, id order.
-- SKIP LOCKED lets every producer of the fleet fetch at once without waiting on each other.
-- attempted_by records [node, producer uuid] so rescue can tell whose jobs are orphaned.
WITH clock AS (
    SELECT coalesce(%(now)s::timestamp, timezone('UTC', now())) AS now
),
claimed AS (
    SELECT id AS claimed_id
    FROM {prefix}.oban_jobs
    WHERE state = 'available' AND queue = %(queue)s AND attempt < max_attempts
    ORDER BY priority, scheduled_at, id
    LIMIT %(demand)s
    FOR UPDATE SKIP LOCKED
)
UPDATE {prefix}.oban_jobs AS j
SET state = 'executing',
    attempt = j.attempt + 1,
    attempted_at = clock.now,
    attempted_by = ARRAY[%(node)s::text, %(producer)s::text]
FROM claimed, clock
WHERE j.id = claimed.claimed_id
  AND j.attempt < j.max_attempts
RETURNING {job_columns};
