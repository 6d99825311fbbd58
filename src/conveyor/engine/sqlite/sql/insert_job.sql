-- Every job of an insert after the first, with the id that follows the previous one.
INSERT INTO oban_jobs (
    id, state, queue, worker, args, meta, tags, priority, max_attempts, scheduled_at, inserted_at
) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);
