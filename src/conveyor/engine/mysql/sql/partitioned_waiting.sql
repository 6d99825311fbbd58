-- After a partitioned claim, in its transaction: do jobs of the queue still wait that could run now
-- (no ordered lock holds them)? A claim that took less than its demand while such jobs wait was
-- stopped by a partition's limit, so the producer tries again soon.
SELECT EXISTS (
    SELECT 1 FROM {prefix}.oban_jobs AS c
    WHERE c.state = 'available' AND c.queue = %(queue)s AND c.attempt < c.max_attempts AND {lock_free}
);
