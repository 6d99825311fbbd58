-- Forget the records of workflows that ended more than %(max_age)s seconds ago. A row still holding
-- a lock stays while its workflow has an unfinished step (its steps were pruned in part while it
-- runs); once none is left, the lock goes with the record.
DELETE FROM {prefix}.conveyor_workflows AS w
WHERE w.finished_at < coalesce(%(now)s::timestamp, timezone('UTC', now())) - make_interval(secs => %(max_age)s)
  AND (w.lock IS NULL OR NOT EXISTS (
      SELECT 1 FROM {prefix}.oban_jobs AS j
      WHERE j.meta ? 'workflow_id' AND (j.meta ->> 'workflow_id') = w.id
        AND j.state NOT IN ('completed', 'cancelled', 'discarded')
  ));
