-- Delete one bounded batch of final jobs that ended before the cut-off. SKIP LOCKED and the small
-- batch keep locks short while nodes keep working on the table.
WITH clock AS (
    SELECT coalesce(%(now)s::timestamp, timezone('UTC', now())) AS now
),
doomed AS (
    SELECT id FROM {prefix}.oban_jobs AS j, clock
    WHERE ((state = 'completed' AND completed_at < clock.now - make_interval(secs => %(max_age)s))
       OR (state = 'cancelled' AND cancelled_at < clock.now - make_interval(secs => %(max_age)s))
       OR (state = 'discarded' AND discarded_at < clock.now - make_interval(secs => %(max_age)s)))
      -- A finished workflow step stays while steps of its workflow wait: they read how it ended.
      AND NOT (j.meta ? 'workflow_id' AND EXISTS (
          SELECT 1 FROM {prefix}.oban_jobs AS d
          WHERE (d.meta ->> 'workflow_id') = (j.meta ->> 'workflow_id') AND {waiting_step}
      ))
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
DELETE FROM {prefix}.oban_jobs AS j USING doomed WHERE j.id = doomed.id;
