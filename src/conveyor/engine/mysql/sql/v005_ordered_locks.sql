-- Migration 5: ordered locks (JobRequest.lock). The key of an unfinished job with meta.lock_key, as
-- a virtual column (NULL once the job is final), and the index the fetch looks keys up through.
ALTER TABLE {prefix}.oban_jobs ADD COLUMN conveyor_lock_key VARCHAR(255) GENERATED ALWAYS AS (
    CASE WHEN state NOT IN ('completed', 'discarded', 'cancelled')
    THEN JSON_VALUE(meta, '$.lock_key') END
) VIRTUAL;
CREATE INDEX conveyor_ordered_lock_index ON {prefix}.oban_jobs (conveyor_lock_key, id);
