-- The jobs a claim takes: up to the demand of available jobs of one queue with an attempt left, in
-- priority, scheduled_at, id order, locked; rows another claim holds are skipped, never waited for.
-- A job with an ordered lock (conveyor_lock_key, v005) is taken only when no job of its key runs and
-- none enqueued before it waits, nor a cancelled run of its key still goes on (listed in its
-- producer's meta.stopping until the producer's beat stops holding it). MySQL's UPDATE can neither
-- read its own table in a subquery nor return rows, so claim_update.sql then updates these ids, in
-- the same transaction.
SELECT c.id FROM {prefix}.oban_jobs AS c
WHERE c.state = 'available' AND c.queue = %(queue)s AND c.attempt < c.max_attempts
  AND (c.conveyor_lock_key IS NULL OR (NOT EXISTS (
      SELECT 1 FROM {prefix}.oban_jobs AS o
      WHERE o.conveyor_lock_key = c.conveyor_lock_key AND (o.id < c.id OR o.state = 'executing')
  ) AND NOT EXISTS (
      SELECT 1
      FROM {prefix}.oban_producers AS p,
          JSON_TABLE(p.meta, '$.stopping[*]' COLUMNS (id BIGINT PATH '$' NULL ON ERROR)) AS s,
          {prefix}.oban_jobs AS x
      WHERE x.id = s.id AND JSON_VALUE(x.meta, '$.lock_key') = c.conveyor_lock_key
  )))
ORDER BY c.priority, c.scheduled_at, c.id
LIMIT %(demand)s
FOR UPDATE SKIP LOCKED;
