-- The time ("at") of every errors entry of a failed attempt that left its job to run again, among
-- the jobs that may hold one since %(since)s: migration 9's virtual column and its index (NULL for
-- the jobs that cannot hold one). The entry of the attempt that ended a discarded or cancelled job
-- is not a retry. The engine reads the times and buckets them; errors that are not an array, and
-- entries that are not objects, give no row or a NULL time.
SELECT e.at
FROM {prefix}.oban_jobs AS j,
    JSON_TABLE(j.errors, '$[*]' COLUMNS (
        at VARCHAR(64) PATH '$.at',
        attempt VARCHAR(32) PATH '$.attempt'
    )) AS e
WHERE j.conveyor_failed_key >= %(since)s
  AND {queues}
  AND e.at IS NOT NULL
  AND NOT (j.state IN ('discarded', 'cancelled') AND e.attempt <=> CAST(j.attempt AS CHAR));
