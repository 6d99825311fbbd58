-- The failed attempts that left their job to run again, in each bucket of a window, by the time
-- each failure was recorded (the "at" of its errors entry). The jobs that may hold one are read
-- through migration 9's partial index (failed_jobs.sql, keyed by failed_key.sql, which is never
-- earlier than a failure the job recorded; ten minutes of slack cover a node clock ahead of the
-- database's). The entry of the attempt that ended a discarded or cancelled job is not a retry: it
-- counts as discarded, or not at all. error_entries_*.sql expands the errors column of either
-- layout, error_time.sql reads an entry's time without ever failing on a malformed one (NULL).
WITH clock AS (
    SELECT coalesce(%(now)s::timestamp, timezone('UTC', now())) AS now
),
bounds AS (
    SELECT array_agg(clock.now - b.start_offset ORDER BY b.i) AS starts, clock.now AS hi
    FROM clock, unnest(%(starts)s::interval[]) WITH ORDINALITY AS b(start_offset, i)
    GROUP BY clock.now
),
failures AS MATERIALIZED (
    SELECT {error_time} AS at
    FROM bounds, {prefix}.oban_jobs AS j,
        LATERAL {error_entries} AS e(entry),
        LATERAL (SELECT e.entry ->> 'at' AS at_text) AS t
    WHERE {failed_jobs}
      AND {failed_key} >= bounds.starts[1] - interval '10 minutes'
      AND (%(queues)s::text[] IS NULL OR j.queue = ANY(%(queues)s::text[]))
      AND NOT (j.state IN ('discarded', 'cancelled') AND e.entry ->> 'attempt' = j.attempt::text)
)
SELECT width_bucket(f.at, bounds.starts) - 1 AS bucket, count(*)
FROM failures AS f, bounds
WHERE f.at >= bounds.starts[1] AND f.at < bounds.hi
GROUP BY 1;
