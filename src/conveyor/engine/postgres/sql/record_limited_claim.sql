-- After a claim under fleet-wide limits, in its transaction and under the queue's lock: remember the
-- starts for the rate limit (one row per claim), forget those well past its window, and tell what the
-- limits had left, so the producer knows whether a limit stopped it. Rows are kept a margin beyond the
-- window (twice the period and a minute): a claim whose transaction began a little earlier, while
-- this one held the lock, still counts from its own, earlier, clock. The inserted row is not visible
-- to this statement's own reads, so the new starts are added by hand.
WITH clock AS (
    SELECT coalesce(%(now)s::timestamp, timezone('UTC', now())) AS now
),
recorded AS (
    INSERT INTO {prefix}.conveyor_rate_starts (queue, started_at, started)
    SELECT %(queue)s, clock.now, %(started)s FROM clock
    WHERE %(rate_allowed)s::integer IS NOT NULL AND %(started)s > 0
    RETURNING 1
),
forgotten AS (
    DELETE FROM {prefix}.conveyor_rate_starts AS r
    USING clock
    WHERE %(rate_allowed)s::integer IS NOT NULL AND r.queue = %(queue)s
      AND r.started_at <= clock.now - make_interval(secs => 2 * %(rate_period)s::double precision + 60)
    RETURNING 1
)
SELECT
    CASE WHEN %(global_limit)s::integer IS NULL THEN NULL ELSE (
        SELECT count(*) FROM {prefix}.oban_jobs WHERE state = 'executing' AND queue = %(queue)s
    ) END AS running,
    CASE WHEN %(rate_allowed)s::integer IS NULL THEN NULL ELSE %(started)s + (
        SELECT coalesce(sum(r.started), 0) FROM {prefix}.conveyor_rate_starts AS r, clock
        WHERE r.queue = %(queue)s
          AND r.started_at > clock.now - make_interval(secs => %(rate_period)s::double precision)
    ) END AS started_in_window,
    (SELECT count(*) FROM recorded) + (SELECT count(*) FROM forgotten) AS written;
