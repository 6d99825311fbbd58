-- Keep at most %(keep)s final jobs of one queue (the newest); delete one bounded batch beyond that.
WITH doomed AS (
    SELECT id FROM {prefix}.oban_jobs
    WHERE queue = %(queue)s AND state IN ('completed', 'cancelled', 'discarded')
    ORDER BY id DESC
    OFFSET %(keep)s
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
DELETE FROM {prefix}.oban_jobs AS j USING doomed WHERE j.id = doomed.id;
