-- The jobs that became completed, discarded and cancelled in each bucket of a window, through each
-- state's partial index on its time (completed_at, discarded_at, cancelled_at). The engine puts
-- one stats_finished_kind.sql per state below, joined by UNION ALL. The buckets run back from now by the
-- offsets %(starts)s (each bucket's start) and %(ends)s (its end).
WITH clock AS (
    SELECT coalesce(%(now)s::timestamp, timezone('UTC', now())) AS now
),
bounds AS (
    SELECT b.i::int - 1 AS bucket, clock.now - b.start_offset AS lo, clock.now - b.end_offset AS hi
    FROM clock, unnest(%(starts)s::interval[], %(ends)s::interval[]) WITH ORDINALITY AS b(start_offset, end_offset, i)
)
{kinds};
