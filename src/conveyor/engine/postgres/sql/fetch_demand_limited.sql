greatest(0, least(
    %(demand)s,
    CASE WHEN %(global_limit)s::integer IS NULL THEN %(demand)s ELSE %(global_limit)s::integer - (
        SELECT count(*) FROM {running_jobs} AS x
    ) END,
    CASE WHEN %(rate_allowed)s::integer IS NULL THEN %(demand)s ELSE %(rate_allowed)s::integer - (
        SELECT coalesce(sum(r.started), 0) FROM {prefix}.conveyor_queue_starts AS r
        WHERE r.queue = %(queue)s
          AND r.started_at > (SELECT now FROM clock) - make_interval(secs => %(rate_period)s::double precision)
    ) END
))
