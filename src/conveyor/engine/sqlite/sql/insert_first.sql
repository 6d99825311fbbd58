-- The first job of an insert: SQLite picks its id (AUTOINCREMENT: above every id ever used). The
-- insert now holds the write lock, so the following jobs take the next ids (insert_job.sql), and
-- the ids come back in input order without reading them row by row.
INSERT INTO oban_jobs (
    id, state, queue, worker, args, meta, tags, priority, max_attempts, scheduled_at, inserted_at
) VALUES (NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
RETURNING id;
