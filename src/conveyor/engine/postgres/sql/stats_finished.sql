-- The jobs that became completed, discarded and cancelled in each bucket of a window, through each
-- state's partial index on its time (completed_at, discarded_at, cancelled_at). The buckets are
-- given by their bounds (%(lows)s and %(highs)s, naive UTC); the engine puts one
-- stats_finished_kind.sql per state below, joined by UNION ALL.
WITH bounds AS (
    SELECT b.i::int - 1 AS bucket, b.lo, b.hi
    FROM unnest(%(lows)s::timestamp[], %(highs)s::timestamp[]) WITH ORDINALITY AS b(lo, hi, i)
)
{kinds};
