-- The time ("at") of every errors entry of a failed attempt that left its job to run again, among
-- the jobs that may hold one since :since: migration 9's partial index (failed_jobs.sql, keyed by
-- failed_key.sql, never earlier than a failure the job recorded). The entry of the attempt that
-- ended a discarded or cancelled job is not a retry. The engine reads the times and buckets them;
-- errors that are not a JSON array, and entries that are not objects, are skipped.
SELECT e.value ->> 'at'
FROM oban_jobs AS j,
    json_each(CASE WHEN json_valid(j.errors) THEN CASE WHEN json_type(j.errors) = 'array' THEN j.errors END END) AS e
WHERE {failed_jobs}
  AND {failed_key} >= :since
  AND {queues}
  AND e.type = 'object'
  AND NOT (j.state IN ('discarded', 'cancelled') AND e.value ->> 'attempt' IS j.attempt);
