-- Make matching jobs available now. A job that used up its attempts gets one more, and the
-- timestamps of its previous ending are cleared, as Oban does.
--
-- A unique job (meta.uniq_key) keeps its key unless another job holds it in one of its unique
-- states, or another job of this retry has it too: then it drops its markers and runs as a plain job
-- (available again, it would otherwise break the unique index and fail the whole retry). The key
-- expression and the predicate repeat the index's (v004_unique_jobs.sql), so the lookup uses it.
--
-- A workflow step with dependencies never goes on before they finish: a suspended one is waiting
-- already and is left alone; any other is held (suspended) rather than made available, and settled
-- in the same transaction right after (workflows.settle_in), as when its dependencies end.
WITH retry_targets AS MATERIALIZED (
    SELECT id FROM oban_jobs
    WHERE {filter}
      AND state NOT IN ('available', 'executing')
      AND NOT (state = 'suspended' AND {step_with_deps})
    ORDER BY id
    LIMIT :limit
)
UPDATE oban_jobs
SET state = CASE WHEN {step_with_deps} THEN 'suspended' ELSE 'available' END,
    scheduled_at = :now,
    max_attempts = max(max_attempts, attempt + 1),
    completed_at = NULL,
    cancelled_at = NULL,
    discarded_at = NULL,
    meta = CASE
        WHEN {unique_key} IS NULL THEN meta
        WHEN EXISTS (
            SELECT 1 FROM oban_jobs AS o
            WHERE (CASE WHEN json_valid(o.meta) THEN o.meta ->> 'uniq_key' END) = oban_jobs.meta ->> 'uniq_key'
              AND o.id <> oban_jobs.id
              AND (CASE WHEN json_valid(o.meta) THEN o.meta ->> 'uniq_key' IS NOT NULL AND instr(o.meta ->> 'uniq_states', '"' || o.state || '"') > 0 ELSE 0 END)
        ) OR EXISTS (
            SELECT 1 FROM retry_targets AS t JOIN oban_jobs AS o ON o.id = t.id
            WHERE (CASE WHEN json_valid(o.meta) THEN o.meta ->> 'uniq_key' END) = oban_jobs.meta ->> 'uniq_key'
              AND o.id <> oban_jobs.id
        ) THEN json_remove(meta, '$.uniq_key', '$.uniq_states')
        ELSE meta
    END
WHERE id IN (SELECT id FROM retry_targets)
RETURNING id, queue, state;
