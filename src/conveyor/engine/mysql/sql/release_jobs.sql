-- Give jobs back at shutdown without spending the attempt: another node runs them again at once.
-- By the primary key only, whatever the table's size (ack_targets.sql says why).
UPDATE {prefix}.oban_jobs FORCE INDEX (PRIMARY)
SET state = 'available', attempt = GREATEST(attempt - 1, 0)
WHERE id IN %(ids)s;
