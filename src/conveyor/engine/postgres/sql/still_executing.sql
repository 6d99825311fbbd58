-- Which of these jobs are still executing? A node asks to notice cancellations it did not hear.
SELECT id FROM {prefix}.oban_jobs WHERE id = ANY(%(ids)s::bigint[]) AND state = 'executing';
