-- Keep the newest %(keep)s (highest ids) of the final jobs one retention rule governs (or of the
-- whole table); delete one bounded batch of the older ones, whatever their age.
WITH doomed AS (
    SELECT j.id FROM {prefix}.oban_jobs AS j
    WHERE ((%(completed)s AND j.state = 'completed')
        OR (%(cancelled)s AND j.state = 'cancelled')
        OR (%(discarded)s AND j.state = 'discarded'))
      AND {governed}
      -- A finished workflow step stays while steps of its workflow wait: they read how it ended.
      AND NOT {spared}
    ORDER BY j.id DESC
    OFFSET %(keep)s
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
