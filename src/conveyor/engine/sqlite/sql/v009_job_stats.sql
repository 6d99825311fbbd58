-- Migration 9: what job_stats reads (conveyor/stats.py). The failed attempts of a window are read
-- from the jobs that may have recorded one: every job past its first attempt, and a job at its
-- first attempt that is waiting to run again. A job that succeeds at its first attempt never
-- enters this index. The key is the latest of the job's times (a missing one counts as ''), never
-- earlier than a failure the job recorded. The expressions are fragments (failed_jobs.sql,
-- failed_key.sql) that the statement reading the index repeats word for word: SQLite uses an
-- expression index, and a partial one, only for the same expression.
CREATE INDEX IF NOT EXISTS conveyor_failed_jobs_index
ON oban_jobs (({failed_key}))
WHERE {failed_jobs};
