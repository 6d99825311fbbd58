-- The jobs that hold any of the given unique keys in one of their unique states (the virtual column
-- of v004_unique_jobs.sql is NULL otherwise). FOR UPDATE: under REPEATABLE READ the locking read also
-- locks the index gap of a key nobody holds yet, so a concurrent insert of the same key waits for
-- this transaction (or one of the two is chosen as a deadlock victim: a transient error, retried).
SELECT conveyor_uniq_key, id FROM {prefix}.oban_jobs
WHERE conveyor_uniq_key IN %s
FOR UPDATE;
