-- The jobs a claim takes: up to the demand of available jobs of one queue with an attempt left, in
-- priority, scheduled_at, id order, locked; rows another claim holds are skipped, never waited for.
-- A job with an ordered lock is taken only when its key lets it (lock_free.sql). MySQL's UPDATE can
-- neither read its own table in a subquery nor return rows, so claim_update.sql then updates these
-- ids, in the same transaction.
SELECT c.id FROM {prefix}.oban_jobs AS c
WHERE c.state = 'available' AND c.queue = %(queue)s AND c.attempt < c.max_attempts
  AND {lock_free}
ORDER BY c.priority, c.scheduled_at, c.id
LIMIT %(demand)s
FOR UPDATE SKIP LOCKED;
