-- Insert the jobs of due cron ticks. A tick is claimed by inserting its (name, tick) row; only
-- claimed ticks insert a job, so a tick another node (or an earlier run) already handled inserts
-- nothing. Concurrent leaders serialise on the primary key.
WITH clock AS (
    SELECT coalesce(%(now)s::timestamp, timezone('UTC', now())) AS now
),
entries AS (
    -- One row per (name, tick): a tick listed twice (one entry configured twice) is still one job.
    SELECT DISTINCT ON (e.name, e.tick) *
    FROM jsonb_to_recordset(%(entries)s::jsonb) AS e(
        name text, tick timestamp, worker text, queue text, args jsonb, meta jsonb, tags text[],
        priority smallint, max_attempts smallint
    )
),
claimed AS (
    INSERT INTO {prefix}.conveyor_cron_ticks (name, tick, inserted_at)
    SELECT e.name, e.tick, clock.now FROM entries AS e, clock
    ON CONFLICT (name, tick) DO NOTHING
    RETURNING name, tick
),
inserted AS (
    INSERT INTO {prefix}.oban_jobs (
        state, queue, worker, args, meta, tags, priority, max_attempts, scheduled_at, inserted_at
    )
    SELECT 'available', e.queue, e.worker, e.args, e.meta, e.tags, e.priority, e.max_attempts,
           clock.now, clock.now
    FROM entries AS e JOIN claimed AS c ON c.name = e.name AND c.tick = e.tick, clock
    RETURNING id, queue, meta ->> 'cron_name' AS name
),
notified AS (
    SELECT pg_notify(%(insert_channel)s, jsonb_build_object('queue', queue)::text)
    FROM (SELECT DISTINCT queue FROM inserted) AS queues
)
SELECT id, name, (SELECT count(*) FROM notified) FROM inserted ORDER BY id;
