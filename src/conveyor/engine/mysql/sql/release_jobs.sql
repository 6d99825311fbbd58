-- Give jobs back at shutdown without spending the attempt: another node runs them again at once.
UPDATE {prefix}.oban_jobs
SET state = 'available', attempt = GREATEST(attempt - 1, 0)
WHERE id IN %(ids)s;
