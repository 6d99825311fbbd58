-- The jobs of an insert after the first (insert_first.sql): many rows per statement, one
-- "(?, ...)" group per job in place of {values}. The transaction holds the write lock, so SQLite
-- gives them the ids that follow the first one, in input order (insert_last_id.sql checks).
INSERT INTO oban_jobs (
    state, queue, worker, args, meta, tags, priority, max_attempts, scheduled_at, inserted_at
) VALUES {values};
