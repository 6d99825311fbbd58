-- The executing jobs of a queue under a global limit, with the producer running each
-- (attempted_by's second item): fetch_jobs leaves out those the caller says ended and those of dead
-- producers before counting them.
SELECT id, attempt, JSON_VALUE(attempted_by, '$[1]')
FROM {prefix}.oban_jobs
WHERE state = 'executing' AND queue = %(queue)s;
