-- The second step of retry_jobs.sql: retried unique jobs take their markers back, unless a job now
-- holds their key. Where a twin is still being inserted by an open transaction, the unique index
-- makes this statement wait for that transaction: if it commits, the statement fails with a unique
-- violation and the engine runs it again in a fresh savepoint, where the twin is seen and its job
-- gives way; if it rolls back, the job keeps its key. The rows are meant to be taken in key order
-- (the order batches of twins are inserted in: insert_unique_jobs.sql), so that a retry and an
-- insert meeting several of the same keys wait rather than deadlock.
WITH input AS MATERIALIZED (
    SELECT r.id, r.uniq_key, r.markers
    FROM jsonb_to_recordset(%(jobs)s::jsonb) AS r(id bigint, uniq_key text, markers jsonb)
    ORDER BY r.uniq_key COLLATE "C"
)
UPDATE {prefix}.oban_jobs AS j
SET meta = j.meta || input.markers
FROM input
WHERE j.id = input.id
  AND j.state = 'available'
  AND jsonb_typeof(j.meta) = 'object' AND NOT j.meta ? 'uniq_key'
  AND NOT EXISTS (
      SELECT 1 FROM {prefix}.oban_jobs AS o
      WHERE (o.meta ->> 'uniq_key') = input.uniq_key AND o.id <> j.id AND {unique_predicate}
  )
RETURNING j.id;
