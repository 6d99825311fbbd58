-- The executing jobs of a queue under a global limit, with the producer running each
-- (attempted_by's second item) and the key of the partition each counts against ('' when the
-- limit is not partitioned): fetch_jobs leaves out those the caller says ended and those of dead
-- producers before counting them.
SELECT id, attempt, JSON_VALUE(attempted_by, '$[1]'), {global_key}
FROM {prefix}.oban_jobs
WHERE state = 'executing' AND queue = %(queue)s;
