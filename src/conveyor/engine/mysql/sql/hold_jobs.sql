-- Hold jobs suspended until their workflow settles them (steps with dependencies just inserted, in
-- the inserting transaction; failed steps a workflow retry sends back to wait).
-- By the primary key only, whatever the table's size (ack_targets.sql says why).
UPDATE {prefix}.oban_jobs FORCE INDEX (PRIMARY)
SET state = 'suspended',
    max_attempts = GREATEST(max_attempts, attempt + 1),
    cancelled_at = NULL,
    discarded_at = NULL
WHERE id IN %s AND state IN ('available', 'scheduled', 'cancelled', 'discarded');
