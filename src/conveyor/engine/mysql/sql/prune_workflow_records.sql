-- Forget workflow records finished before %(cutoff)s, unless a locked workflow still has jobs
-- that are not final (its lock must keep holding).
DELETE FROM {prefix}.conveyor_workflows
WHERE finished_at < %(cutoff)s
  AND ("lock" IS NULL OR NOT EXISTS (
      SELECT 1 FROM {prefix}.oban_jobs AS j
      WHERE j.conveyor_workflow_id = conveyor_workflows.id
        AND j.state NOT IN ('completed', 'cancelled', 'discarded')
  ));
