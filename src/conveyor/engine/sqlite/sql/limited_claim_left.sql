-- What the limits of a queue have left after a claim (in its transaction): running jobs for the
-- global limit, starts in the window for the rate limit (NULL for a limit the queue does not have).
SELECT
    CASE WHEN :global_limit IS NULL THEN NULL ELSE (
        SELECT count(*) FROM {running_jobs} AS x
    ) END,
    CASE WHEN :rate_allowed IS NULL THEN NULL ELSE (
        SELECT coalesce(sum(started), 0) FROM conveyor_queue_starts WHERE queue = :queue AND started_at > :window_start
    ) END;
