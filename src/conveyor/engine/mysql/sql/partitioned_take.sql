-- The jobs a partitioned claim chose, locked for claim_update.sql: those still waiting; one another
-- transaction holds is skipped, never waited for.
-- By the primary key only, whatever the table's size (ack_targets.sql says why).
SELECT id FROM {prefix}.oban_jobs FORCE INDEX (PRIMARY)
WHERE id IN %(ids)s AND state = 'available' AND attempt < max_attempts
ORDER BY id
FOR UPDATE SKIP LOCKED;
