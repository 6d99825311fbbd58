-- One state of stats_finished.sql, timed by its own column. A bucket reads at most %(cap)s + 1 of
-- its jobs, in time order (from the index alone unless queues are asked for): when there are
-- more, the engine extrapolates from the part of the bucket they cover. Jobs sharing the time of
-- the last one read (one ack writes many) are left out of that part, as are those not read.
SELECT '{state}' AS kind, bounds.bucket, picked.seen, picked.matched, picked.matched_before_last,
    extract(epoch FROM picked.last - bounds.lo)::float8 AS covered,
    extract(epoch FROM bounds.hi - bounds.lo)::float8 AS width
FROM bounds, LATERAL (
    SELECT count(*) AS seen,
        count(*) FILTER (WHERE sample.matches) AS matched,
        count(*) FILTER (WHERE sample.matches AND sample.at < sample.last) AS matched_before_last,
        max(sample.last) AS last
    FROM (
        SELECT first.at, first.matches, max(first.at) OVER () AS last
        FROM (
            SELECT j.{column} AS at, {matches} AS matches
            FROM {prefix}.oban_jobs AS j
            WHERE j.state = '{state}' AND j.{column} >= bounds.lo AND j.{column} < bounds.hi
            ORDER BY j.{column}
            LIMIT %(cap)s + 1
        ) AS first
    ) AS sample
) AS picked
WHERE picked.seen > 0
