-- Migration 5: ordered locks (JobRequest.lock). A job with meta.lock_key runs only when no job with
-- its key runs and none enqueued before it waits (fetch_jobs.sql, lock_free.sql). The fetch looks
-- such jobs up by key through this index, which holds only the unfinished ones, so it stays small
-- however long the history grows.
CREATE INDEX IF NOT EXISTS conveyor_ordered_lock_index
ON {prefix}.oban_jobs ((meta ->> 'lock_key'), id)
WHERE meta ? 'lock_key' AND state NOT IN ('completed', 'discarded', 'cancelled');
