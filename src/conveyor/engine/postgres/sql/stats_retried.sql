-- The failed attempts of a window, by a sample of the jobs that may have recorded one: those of
-- migration 9's partial index (failed_jobs.sql), keyed by the latest of their times (failed_key.sql,
-- never earlier than a failure the job recorded). The keys are cut into ranges (%(lows)s and
-- %(highs)s, the last one open: NULL), and each range gives its first %(cap)s + 1 jobs in key
-- order, with how many it gave (seen) and the last key read. Each errors entry of those jobs comes
-- back with its "at" as text (the engine reads the times, skipping what is not one), except the
-- entry of the attempt that ended a discarded or cancelled job: that one is no retry. For the open
-- range, the number of jobs in it (total) scales a sample that stopped.
WITH ranges AS (
    SELECT r.i::int - 1 AS key_range, r.lo, coalesce(r.hi, 'infinity') AS hi
    FROM unnest(%(lows)s::timestamp[], %(highs)s::timestamp[]) WITH ORDINALITY AS r(lo, hi, i)
)
SELECT ranges.key_range, j.seen, j.key < j.last AS before_last, e.entry ->> 'at' AS at,
    extract(epoch FROM j.last - ranges.lo)::float8 AS covered,
    CASE WHEN ranges.hi < 'infinity' THEN extract(epoch FROM ranges.hi - ranges.lo)::float8 END AS width,
    CASE WHEN ranges.hi = 'infinity' AND j.seen > %(cap)s THEN (
        SELECT count(*) FROM {prefix}.oban_jobs
        WHERE {failed_jobs} AND {failed_key} >= ranges.lo AND {queues}
    ) END AS total
FROM ranges, LATERAL (
    SELECT sample.*, count(*) OVER () AS seen, max(sample.key) OVER () AS last
    FROM (
        SELECT {failed_key} AS key, state, attempt, errors
        FROM {prefix}.oban_jobs
        WHERE {failed_jobs} AND {failed_key} >= ranges.lo AND {failed_key} < ranges.hi AND {queues}
        ORDER BY {failed_key}
        LIMIT %(cap)s + 1
    ) AS sample
) AS j, LATERAL {error_entries} AS e(entry)
WHERE NOT (j.state IN ('discarded', 'cancelled') AND e.entry ->> 'attempt' = j.attempt::text);
