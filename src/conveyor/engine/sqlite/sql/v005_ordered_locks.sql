-- Migration 5: ordered locks (JobRequest.lock). A job with meta.lock_key runs only when no job with
-- its key runs and none enqueued before it waits (fetch_jobs.sql, lock_free.sql). The fetch looks
-- such jobs up by key through this index, which holds only the unfinished ones. The expressions are
-- repeated word for word by lock_free.sql (SQLite uses an expression index only for the same one).
CREATE INDEX IF NOT EXISTS conveyor_ordered_lock_index
ON oban_jobs ((CASE WHEN json_valid(meta) THEN meta ->> 'lock_key' END), id)
WHERE (CASE WHEN json_valid(meta) THEN meta ->> 'lock_key' IS NOT NULL ELSE 0 END)
  AND state NOT IN ('completed', 'discarded', 'cancelled');
