-- Make matching jobs available now. A job that used up its attempts gets one more, and the
-- timestamps of its previous ending are cleared, as Oban does.
--
-- A unique job (meta.uniq_key) keeps its key unless another job holds it in one of its unique
-- states, or another job of this retry has it too: then it drops its markers and runs as a plain job
-- (available again, it would otherwise break the unique index and fail the whole retry).
--
-- A workflow step with dependencies never goes on before they finish: a suspended one is waiting
-- already and is left alone; any other is held (suspended) rather than made available, and the
-- caller settles it right after (settle_steps.sql), as when its dependencies end. Held in the same
-- statement as the dependencies this retry makes available, it is never seen waiting on one still
-- failed (which a sweep would take as a reason to cancel it again).
WITH clock AS (
    SELECT coalesce(%(now)s::timestamp, timezone('UTC', now())) AS now
),
targets AS (
    SELECT id FROM {prefix}.oban_jobs
    WHERE {filter}
      AND state NOT IN ('available', 'executing')
      AND NOT (state = 'suspended' AND meta ? 'workflow_id')
    ORDER BY id
    LIMIT %(limit)s
    FOR UPDATE
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
            WHEN jsonb_typeof(j.meta) IS DISTINCT FROM 'object' OR NOT j.meta ? 'uniq_key' THEN j.meta
            WHEN EXISTS (
                SELECT 1 FROM {prefix}.oban_jobs AS o
                WHERE (o.meta ->> 'uniq_key') = (j.meta ->> 'uniq_key') AND o.id <> j.id AND {unique_predicate}
            ) OR EXISTS (
                SELECT 1 FROM targets AS t JOIN {prefix}.oban_jobs AS o ON o.id = t.id
                WHERE (o.meta ->> 'uniq_key') = (j.meta ->> 'uniq_key') AND o.id <> j.id
            ) THEN j.meta - 'uniq_key' - 'uniq_states'
            ELSE j.meta
        END
    FROM targets, clock
    WHERE j.id = targets.id
    RETURNING j.id, j.queue, j.state::text AS state
),
notified AS (
    SELECT pg_notify(%(insert_channel)s, jsonb_build_object('queue', queue)::text)
    FROM (SELECT DISTINCT queue FROM retried WHERE state = 'available') AS queues
)
SELECT id, state, (SELECT count(*) FROM notified) FROM retried ORDER BY id;
