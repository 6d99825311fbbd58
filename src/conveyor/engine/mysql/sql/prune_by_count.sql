-- One count batch of a prune (engine/_prune_plan.py): of the final jobs in the batch's states
-- its rule governs, all but the newest %(keep)s (by id), bounded, locked; delete_jobs.sql deletes
-- them (deleted_columns.sql: see prune_by_age.sql). A finished workflow step stays while steps of
-- its workflow wait.
SELECT {deleted_columns} FROM {prefix}.oban_jobs AS j
WHERE j.state IN %(states)s
  AND {governed}
  AND NOT {spared}
ORDER BY j.id DESC
LIMIT %(limit)s OFFSET %(keep)s
FOR UPDATE;
