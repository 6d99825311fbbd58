-- One age batch of a prune (engine/_prune_plan.py), for one final state: jobs of %(state)s that
-- ended before %(cutoff)s, governed by the batch's rule, earliest ended first, bounded, locked;
-- delete_jobs.sql deletes them; their columns (deleted_columns.sql) let the pruner record the
-- workflows of the steps among them. {ended} is the state's time column. A finished workflow step
-- stays while steps of its workflow wait: they read how it ended. Read in the order of the state's
-- (state, {ended}) index, the batch locks rows of that state only: a scan in id order would lock
-- every row it passes, available jobs among them, which claims then skip.
SELECT {deleted_columns} FROM {prefix}.oban_jobs AS j
WHERE j.state = %(state)s AND j.{ended} < %(cutoff)s
  AND {governed}
  AND NOT {spared}
ORDER BY j.{ended}, j.id
LIMIT %(limit)s
FOR UPDATE;
