-- Migration 9: what job_stats reads. The failed attempts of a window are read from the jobs that
-- may have recorded one ({failed_jobs}); the key is the latest of the job's times. A virtual
-- column holds the key for those jobs only (NULL for the rest), and an index reads it.
ALTER TABLE {prefix}.oban_jobs ADD COLUMN conveyor_failed_key DATETIME(6) GENERATED ALWAYS AS (
    CASE WHEN {failed_jobs} THEN {failed_key} END
) VIRTUAL;
CREATE INDEX conveyor_failed_jobs_index ON {prefix}.oban_jobs (conveyor_failed_key);
