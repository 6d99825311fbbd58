,
recorded AS (
    INSERT INTO {prefix}.conveyor_queue_starts (queue, partition, started_at, started)
    SELECT %(queue)s, {rate_key}, (SELECT now FROM clock), count(*) FROM updated
    WHERE %(rate_allowed)s::integer IS NOT NULL
    GROUP BY 2
    RETURNING 1
),
forgotten AS (
    DELETE FROM {prefix}.conveyor_queue_starts AS r
    WHERE %(rate_allowed)s::integer IS NOT NULL AND r.queue = %(queue)s
      AND r.started_at <= (SELECT now FROM clock) - make_interval(secs => 2 * %(rate_period)s::double precision + 60)
    RETURNING 1
)
