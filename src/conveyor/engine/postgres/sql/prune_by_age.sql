-- Delete one bounded batch of the final jobs one retention rule governs that ended more than
-- %(max_age)s seconds before now. Each arm reads the partial index of its state (an arm whose flag
-- is false folds away); SKIP LOCKED and the small batch keep locks short while nodes keep working.
WITH clock AS (
    SELECT coalesce(%(now)s::timestamp, timezone('UTC', now())) - make_interval(secs => %(max_age)s) AS cutoff
),
doomed AS (
    SELECT j.id FROM {prefix}.oban_jobs AS j, clock
    WHERE ((%(completed)s AND j.state = 'completed' AND j.completed_at < clock.cutoff)
        OR (%(cancelled)s AND j.state = 'cancelled' AND j.cancelled_at < clock.cutoff)
        OR (%(discarded)s AND j.state = 'discarded' AND j.discarded_at < clock.cutoff))
      AND {governed}
      -- A finished workflow step stays while steps of its workflow wait: they read how it ended.
      AND NOT {spared}
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
deleted AS (
    DELETE FROM {prefix}.oban_jobs AS j USING doomed WHERE j.id = doomed.id
    RETURNING {deleted_columns}
),
-- The workflows of the deleted steps keep a record of how they ended (record_workflows.sql).
{record_workflows}
SELECT state::text, count(*) FROM deleted GROUP BY state;
