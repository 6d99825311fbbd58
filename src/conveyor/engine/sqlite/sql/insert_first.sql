-- The first job of an insert: SQLite picks its id (AUTOINCREMENT: above every id ever used). From
-- here on the transaction holds the write lock, so nobody else inserts until it ends and the
-- following jobs (insert_jobs.sql) take the next ids in order, without reading them row by row.
INSERT INTO oban_jobs (
    state, queue, worker, args, meta, tags, priority, max_attempts, scheduled_at, inserted_at
) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
RETURNING id;
