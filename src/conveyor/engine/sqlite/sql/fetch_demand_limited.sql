max(0, min(
    :demand,
    CASE WHEN :global_limit IS NULL THEN :demand ELSE :global_limit - (
        SELECT count(*) FROM {running_jobs} AS x
    ) END,
    CASE WHEN :rate_allowed IS NULL THEN :demand ELSE :rate_allowed - (
        SELECT coalesce(sum(r.started), 0) FROM conveyor_queue_starts AS r
        WHERE r.queue = :queue AND r.started_at > :window_start
    ) END
))
