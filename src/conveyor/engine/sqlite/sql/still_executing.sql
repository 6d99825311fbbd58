-- Which of these jobs are still executing? A node asks to notice cancellations it did not hear.
SELECT id FROM oban_jobs WHERE id IN (SELECT value FROM json_each(:ids)) AND state = 'executing';
