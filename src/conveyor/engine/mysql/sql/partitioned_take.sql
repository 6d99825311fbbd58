-- The jobs a partitioned claim chose, locked for claim_update.sql: those still waiting; one another
-- transaction holds is skipped, never waited for.
SELECT id FROM {prefix}.oban_jobs
WHERE id IN %(ids)s AND state = 'available' AND attempt < max_attempts
ORDER BY id
FOR UPDATE SKIP LOCKED;
