-- Priority aging: one step up (priority - 1) for available jobs that have waited longer than
-- %(after)s seconds, oldest first, a bounded batch at a time. Rows a fetch holds are skipped (they
-- are leaving the queue anyway); the locked ids reach the UPDATE as an array, looked up through the
-- primary key (see stage_jobs.sql for why not a join).
WITH clock AS (
    SELECT coalesce(%(now)s::timestamp, timezone('UTC', now())) AS now
),
waiting AS (
    SELECT id
    FROM {prefix}.oban_jobs, clock
    WHERE state = 'available'
      AND priority > 0
      AND scheduled_at <= clock.now - make_interval(secs => %(after)s)
    ORDER BY scheduled_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE {prefix}.oban_jobs AS j
SET priority = j.priority - 1
WHERE j.id = ANY(ARRAY(SELECT id FROM waiting))
RETURNING j.id;
