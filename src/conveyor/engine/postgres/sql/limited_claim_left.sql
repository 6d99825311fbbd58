-- After a claim under fleet-wide limits, in its transaction: what the limits have left, so the
-- producer knows whether a limit stopped it: the queue's executing jobs for the global limit, its
-- starts in the window for the rate limit (NULL for a limit the queue does not have). The claim's own
-- writes (its claimed rows, its recorded starts) are visible here.
WITH clock AS (
    SELECT coalesce(%(now)s::timestamp, timezone('UTC', now())) AS now
)
SELECT
    CASE WHEN %(global_limit)s::integer IS NULL THEN NULL ELSE (
        SELECT count(*) FROM {running_jobs} AS x
    ) END AS running,
    CASE WHEN %(rate_allowed)s::integer IS NULL THEN NULL ELSE (
        SELECT coalesce(sum(r.started), 0) FROM {prefix}.conveyor_queue_starts AS r, clock
        WHERE r.queue = %(queue)s
          AND r.started_at > clock.now - make_interval(secs => %(rate_period)s::double precision)
    ) END AS started_in_window;
