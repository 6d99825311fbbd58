-- Forget the records of workflows that ended before :cutoff. A row still holding a lock stays
-- while its workflow has an unfinished step (its steps were pruned in part while it runs); once
-- none is left, the lock goes with the record.
DELETE FROM conveyor_workflows
WHERE finished_at < :cutoff
  AND (lock IS NULL OR NOT EXISTS (
      SELECT 1 FROM oban_jobs AS j
      WHERE (CASE WHEN json_valid(j.meta) THEN j.meta ->> 'workflow_id' IS NOT NULL ELSE 0 END)
        AND (CASE WHEN json_valid(j.meta) THEN j.meta ->> 'workflow_id' END) = conveyor_workflows.id
        AND j.state NOT IN ('completed', 'cancelled', 'discarded')
  ));
