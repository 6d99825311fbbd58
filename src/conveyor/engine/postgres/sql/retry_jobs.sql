-- Make matching jobs available now. A job that used up its attempts gets one more, and the
-- timestamps of its previous ending are cleared, as Oban does.
--
-- A workflow step with dependencies never goes on before they finish: a suspended one is waiting
-- already and is left alone; any other is held (suspended) rather than made available, and the
-- caller settles it right after (settle_steps.sql), as when its dependencies end. Held in the same
-- statement as the dependencies this retry makes available, it is never seen waiting on one still
-- failed (which a sweep would take as a reason to cancel it again).
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
      AND NOT (state = 'suspended' AND meta ? 'workflow_id')
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
    SET state = (CASE
            WHEN jsonb_typeof(j.meta -> 'deps') = 'array' AND j.meta -> 'deps' <> '[]'::jsonb
                AND j.meta ? 'workflow_id' THEN 'suspended'
            ELSE 'available'
        END)::{prefix}.oban_job_state,
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
    RETURNING j.id, j.queue, j.state::text AS state
),
notified AS (
    SELECT pg_notify(%(insert_channel)s, jsonb_build_object('queue', queue)::text)
    FROM (SELECT DISTINCT queue FROM retried WHERE state = 'available') AS queues
)
SELECT r.id, r.state, k.uniq_key, k.markers::text, (SELECT count(*) FROM notified)
FROM retried AS r LEFT JOIN retaking AS k ON k.id = r.id
ORDER BY r.id;
