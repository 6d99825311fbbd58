-- The executing rows of some jobs, with their attempt and claiming producer: still_executing keeps
-- the attempts asked about (and, given producers, the claims of one of them).
SELECT id, attempt, JSON_VALUE(attempted_by, '$[1]')
FROM {prefix}.oban_jobs
WHERE id IN %(ids)s AND state = 'executing';
