-- Let go of a lock for the holders that finished (no step left that is not completed, cancelled
-- or discarded; a pruned or deleted workflow has none). Runs in the write transaction of the
-- enqueue: SQLite has one writer at a time, so no other enqueuer reads or takes the lock meanwhile.
UPDATE conveyor_workflows SET lock = NULL
WHERE lock = :lock
  AND NOT EXISTS (
      SELECT 1 FROM oban_jobs AS j
      WHERE (CASE WHEN json_valid(j.meta) THEN j.meta ->> 'workflow_id' IS NOT NULL ELSE 0 END)
        AND (CASE WHEN json_valid(j.meta) THEN j.meta ->> 'workflow_id' END) = conveyor_workflows.id
        AND j.state NOT IN ('completed', 'cancelled', 'discarded')
  );
