-- Make matching jobs available now. A job that used up its attempts gets one more, and the
-- timestamps of its previous ending are cleared, as Oban does.
--
-- A unique job (meta.uniq_key) comes back without its markers: available again, it would otherwise
-- meet a twin in the unique index, committed or still being inserted, and fail the whole retry. The
-- jobs that may take their key back (no job this statement sees holds it, no other job of this
-- retry has it) are returned with their markers, for retake_unique.sql; the others give way and
-- run as plain jobs.
WITH clock AS (
    SELECT coalesce(%(now)s::timestamp, timezone('UTC', now())) AS now
),
targets AS (
    SELECT id, meta FROM {prefix}.oban_jobs
    WHERE {filter}
      AND state NOT IN ('available', 'executing')
    ORDER BY id
    LIMIT %(limit)s
    FOR UPDATE
),
retaking AS (
    SELECT t.id, t.meta ->> 'uniq_key' AS uniq_key,
        (SELECT jsonb_object_agg(e.key, e.value) FROM jsonb_each(t.meta) AS e
         WHERE e.key IN ('uniq_key', 'uniq_states')) AS markers
    FROM targets AS t
    WHERE jsonb_typeof(t.meta) = 'object' AND t.meta ? 'uniq_key'
      AND NOT EXISTS (
          SELECT 1 FROM {prefix}.oban_jobs AS o
          WHERE (o.meta ->> 'uniq_key') = (t.meta ->> 'uniq_key') AND o.id <> t.id AND {unique_predicate}
      )
      AND NOT EXISTS (
          SELECT 1 FROM targets AS u
          WHERE (u.meta ->> 'uniq_key') = (t.meta ->> 'uniq_key') AND u.id <> t.id
      )
),
retried AS (
    UPDATE {prefix}.oban_jobs AS j
    SET state = 'available',
        scheduled_at = clock.now,
        max_attempts = greatest(j.max_attempts, j.attempt + 1),
        completed_at = NULL,
        cancelled_at = NULL,
        discarded_at = NULL,
        meta = CASE
            WHEN jsonb_typeof(j.meta) IS DISTINCT FROM 'object' THEN j.meta
            ELSE j.meta - 'uniq_key' - 'uniq_states'
        END
    FROM targets, clock
    WHERE j.id = targets.id
    RETURNING j.id, j.queue
),
notified AS (
    SELECT pg_notify(%(insert_channel)s, jsonb_build_object('queue', queue)::text)
    FROM (SELECT DISTINCT queue FROM retried) AS queues
)
SELECT r.id, k.uniq_key, k.markers::text, (SELECT count(*) FROM notified)
FROM retried AS r LEFT JOIN retaking AS k ON k.id = r.id
ORDER BY r.id;
