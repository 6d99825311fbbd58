,
room AS MATERIALIZED (
    SELECT
        CASE WHEN %(global_limit)s::int IS NOT NULL THEN (SELECT count(*) FROM {running_jobs} AS x) END
            AS running,
        CASE WHEN %(rate_allowed)s::int IS NOT NULL THEN (
            SELECT coalesce(sum(r.started), 0) FROM {prefix}.conveyor_queue_starts AS r
            WHERE r.queue = %(queue)s
              AND r.started_at > (SELECT now FROM clock) - make_interval(secs => %(rate_period)s::double precision)
        ) END AS started
)
