,
recorded AS (
    INSERT INTO {prefix}.conveyor_rate_starts (queue, started_at, started)
    SELECT %(queue)s, (SELECT now FROM clock), count(*) FROM updated
    HAVING %(rate_allowed)s::integer IS NOT NULL AND count(*) > 0
    RETURNING 1
),
forgotten AS (
    DELETE FROM {prefix}.conveyor_rate_starts AS r
    WHERE %(rate_allowed)s::integer IS NOT NULL AND r.queue = %(queue)s
      AND r.started_at <= (SELECT now FROM clock) - make_interval(secs => 2 * %(rate_period)s::double precision + 60)
    RETURNING 1
)
