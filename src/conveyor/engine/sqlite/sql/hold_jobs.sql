-- Hold jobs suspended until their workflow settles them: steps with dependencies just inserted (in
-- the inserting transaction), and failed steps a workflow retry sends back to wait for their
-- dependencies (a step that used up its attempts gets one more, as a retry gives).
UPDATE oban_jobs
SET state = 'suspended',
    max_attempts = max(max_attempts, attempt + 1),
    cancelled_at = NULL,
    discarded_at = NULL
WHERE id IN (SELECT value FROM json_each(:ids)) AND state IN ('available', 'scheduled', 'cancelled', 'discarded')
RETURNING id;
