-- Hold jobs in the suspended state, which no node fetches, until their workflow settles them:
-- steps with dependencies just inserted (in the inserting transaction, so nothing ever sees them
-- available), and failed steps a workflow retry sends back to wait for their dependencies (a step
-- that used up its attempts gets one more, as a retry gives).
UPDATE {prefix}.oban_jobs
SET state = 'suspended',
    max_attempts = greatest(max_attempts, attempt + 1),
    cancelled_at = NULL,
    discarded_at = NULL
WHERE id = ANY(%(ids)s::bigint[]) AND state::text IN ('available', 'scheduled', 'cancelled', 'discarded')
RETURNING id;
