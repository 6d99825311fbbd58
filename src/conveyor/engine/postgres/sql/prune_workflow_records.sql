-- Forget the records of workflows that ended more than %(max_age)s seconds ago (a row still holding
-- a lock is a running workflow's, and stays).
DELETE FROM {prefix}.conveyor_workflows
WHERE finished_at < coalesce(%(now)s::timestamp, timezone('UTC', now())) - make_interval(secs => %(max_age)s)
  AND lock IS NULL;
