-- insert_first.sql for an insert of one unique job (the commonest unique call): the claim of its
-- key is the insert itself. The write lock is held, so no other writer can come between; a stored
-- job holding the key in one of its states makes the unique index (v004_unique_jobs.sql: the
-- target repeats its expression and predicate word for word) refuse the row, nothing is written
-- and nothing returned, and only then is the stored job looked up (unique_lookup_one.sql). One
-- statement fewer than looking first, for the new key a unique enqueue usually brings.
INSERT INTO oban_jobs (
    state, queue, worker, args, meta, tags, priority, max_attempts, scheduled_at, inserted_at
) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT ({unique_key}) WHERE {unique_predicate} DO NOTHING
RETURNING id;
