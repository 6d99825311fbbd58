-- One count batch of a prune (engine/_prune_plan.py): of the final jobs in the batch's states
-- its rule governs, all but the newest %(keep)s (by id), bounded, locked; prune_delete.sql deletes
-- them. A finished workflow step stays while steps of its workflow wait.
SELECT j.id, j.state FROM {prefix}.oban_jobs AS j
WHERE j.state IN %(states)s
  AND {governed}
  AND NOT {spared}
ORDER BY j.id DESC
LIMIT %(limit)s OFFSET %(keep)s
FOR UPDATE;
