-- Let go of a lock for the holders that finished (no step left that is not completed, cancelled or
-- discarded; a pruned or deleted workflow has none). The enqueuer holds the lock's named lock.
UPDATE {prefix}.conveyor_workflows AS w SET "lock" = NULL
WHERE w."lock" = %(lock)s
  AND NOT EXISTS (
      SELECT 1 FROM {prefix}.oban_jobs AS j
      WHERE j.conveyor_workflow_id = w.id AND j.state NOT IN ('completed', 'cancelled', 'discarded')
  );
