-- The unfinished workflow holding a lock, after letting go of it for the holders that finished (no
-- step left that is not completed, cancelled or discarded; a pruned or deleted workflow has none).
-- The outer SELECT sees the rows as before the UPDATE, so the cleared ones are left out by id.
WITH cleared AS (
    UPDATE {prefix}.conveyor_workflows AS w SET lock = NULL
    WHERE w.lock = %(lock)s
      AND NOT EXISTS (
          SELECT 1 FROM {prefix}.oban_jobs AS j
          WHERE j.meta ? 'workflow_id' AND (j.meta ->> 'workflow_id') = w.id
            AND j.state NOT IN ('completed', 'cancelled', 'discarded')
      )
    RETURNING w.id
)
SELECT id FROM {prefix}.conveyor_workflows
WHERE lock = %(lock)s AND id NOT IN (SELECT id FROM cleared);
