-- Rescue orphaned jobs: executing jobs whose producer stopped sending heartbeats, and, as a
-- backstop, executing jobs with no producer row at all that started longer ago than %(backstop)s.
-- A job whose producer row is fresh is never touched, however long it runs. Rescued jobs become
-- available again (discarded when their attempts are used up) and count the rescue in meta.
WITH clock AS (
    SELECT coalesce(%(now)s::timestamp, timezone('UTC', now())) AS now
),
dead AS (
    SELECT p.uuid::text AS uuid
    FROM {prefix}.oban_producers AS p, clock
    WHERE p.updated_at < clock.now - make_interval(secs => %(timeout)s)
),
orphans AS (
    SELECT j.id
    FROM {prefix}.oban_jobs AS j, clock
    WHERE j.state = 'executing'
      AND (
        j.attempted_by[2] IN (SELECT uuid FROM dead)
        OR (
            j.attempted_at < clock.now - make_interval(secs => %(backstop)s)
            AND NOT EXISTS (
                SELECT 1 FROM {prefix}.oban_producers AS p WHERE p.uuid::text = j.attempted_by[2]
            )
        )
      )
    ORDER BY j.id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
rescued AS (
    UPDATE {prefix}.oban_jobs AS j
    SET state = CASE WHEN j.attempt >= j.max_attempts THEN 'discarded' ELSE 'available' END::{prefix}.oban_job_state,
        discarded_at = CASE WHEN j.attempt >= j.max_attempts THEN clock.now ELSE j.discarded_at END,
        meta = coalesce(j.meta, '{}') || jsonb_build_object('rescued', coalesce((j.meta ->> 'rescued')::int, 0) + 1)
    FROM orphans, clock
    WHERE j.id = orphans.id
    RETURNING j.id, j.queue, j.state
),
notified AS (
    SELECT pg_notify(%(insert_channel)s, jsonb_build_object('queue', queue)::text)
    FROM (SELECT DISTINCT queue FROM rescued WHERE state = 'available') AS queues
)
SELECT id, state::text, (SELECT count(*) FROM notified) FROM rescued ORDER BY id;
