,
ready AS (
    -- The step's policy (step_policy.sql, read out of its meta in candidates), and its "blocker":
    -- the first of its dependencies, from the last back, that did not complete (its state,
    -- 'deleted' when it is gone; NULL when every one completed). Steps run roughly in the order
    -- they were added, so an unfinished one is usually met at once and a fan-in over thousands is
    -- not read whole; when every dependency completed (the usual end of a fan-in) that one walk is
    -- the only one.
    SELECT c.id, c.deps, c.workflow, c.early, c.single, c.cancelled, c.discarded,
        c.ignore_cancelled, c.ignore_discarded, c.ignore_deleted, c.run_if,
        CASE WHEN NOT (c.early OR c.single) THEN (
            -- Each dependency is looked up by workflow and name together (a join lets the planner
            -- scan the whole workflow per dependency), in c.deps, read out of meta once
            -- (candidates is MATERIALIZED). OFFSET 0 keeps the lookup one subplan (pulled up, it
            -- would run once for the test and again for the result).
            SELECT coalesce(x.state, 'deleted')
            FROM generate_series(jsonb_array_length(c.deps) - 1, 0, -1) AS i
            CROSS JOIN LATERAL (SELECT {step_state_pending} AS state OFFSET 0) AS x
            WHERE x.state IS DISTINCT FROM 'completed'
            LIMIT 1
        ) END AS blocker
    FROM candidates AS c
),
verdicts AS (
    SELECT r.id, true AS failed, NULL::jsonb AS counts FROM ready AS r WHERE r.early
    UNION ALL
    -- One dependency, ended as the given step did: no lookup.
    SELECT r.id,
        (r.cancelled AND r.ignore_cancelled IS NOT TRUE) OR (r.discarded AND r.ignore_discarded IS NOT TRUE)
        OR (r.run_if = 'any_failed' AND NOT (r.cancelled OR r.discarded))
        OR (r.run_if = 'any_discarded' AND NOT r.discarded)
        OR (r.run_if = 'any_cancelled' AND NOT r.cancelled),
        jsonb_build_object(
            'completed', (NOT (r.cancelled OR r.discarded))::int, 'cancelled', r.cancelled::int,
            'discarded', r.discarded::int, 'deleted', 0
        )
    FROM ready AS r WHERE r.single AND NOT r.early
    UNION ALL
    -- Every dependency completed: the walk saw them all.
    SELECT r.id, coalesce(r.run_if IN ('any_failed', 'any_discarded', 'any_cancelled'), false),
        jsonb_build_object(
            'completed', jsonb_array_length(r.deps), 'cancelled', 0, 'discarded', 0, 'deleted', 0
        )
    FROM ready AS r WHERE NOT (r.early OR r.single) AND r.blocker IS NULL
    UNION ALL
    -- Some dependency ended otherwise: counted, one lookup each, and settled when none is unfinished.
    SELECT v.id,
        (v.deleted > 0 AND v.ignore_deleted IS NOT TRUE)
        OR (v.cancelled > 0 AND v.ignore_cancelled IS NOT TRUE)
        OR (v.discarded > 0 AND v.ignore_discarded IS NOT TRUE)
        -- A step that runs only on some ending of its dependencies (batch callbacks) is cancelled
        -- when they did not end so.
        OR (v.run_if = 'any_failed' AND v.cancelled + v.discarded + v.deleted = 0)
        OR (v.run_if = 'any_discarded' AND v.discarded = 0)
        OR (v.run_if = 'any_cancelled' AND v.cancelled = 0) AS failed,
        jsonb_build_object(
            'completed', v.completed, 'cancelled', v.cancelled, 'discarded', v.discarded, 'deleted', v.deleted
        ) AS counts
    FROM (
        -- Grouped by the id and small flags, never by meta: hashing a fan-in's meta once per
        -- dependency would cost seconds.
        SELECT r.id, r.ignore_cancelled, r.ignore_discarded, r.ignore_deleted, r.run_if,
            count(*) FILTER (WHERE x.state = 'completed') AS completed,
            count(*) FILTER (WHERE x.state = 'cancelled') AS cancelled,
            count(*) FILTER (WHERE x.state = 'discarded') AS discarded,
            count(*) FILTER (WHERE x.state IS NULL) AS deleted,
            count(*) FILTER (WHERE x.state NOT IN ('completed', 'cancelled', 'discarded')) AS unfinished
        FROM ready AS r
        CROSS JOIN LATERAL jsonb_array_elements_text(r.deps) AS dn(name)
        CROSS JOIN LATERAL (SELECT {step_state_ended} AS state OFFSET 0) AS x
        WHERE NOT (r.early OR r.single) AND r.blocker IN ('cancelled', 'discarded', 'deleted')
        GROUP BY r.id, r.ignore_cancelled, r.ignore_discarded, r.ignore_deleted, r.run_if
    ) AS v
    WHERE v.unfinished = 0
),
settled AS (
    UPDATE {prefix}.oban_jobs AS d
    SET state = (CASE
            WHEN v.failed THEN 'cancelled'
            WHEN d.scheduled_at > clock.now THEN 'scheduled'
            ELSE 'available'
        END)::{prefix}.oban_job_state,
        cancelled_at = CASE WHEN v.failed THEN clock.now ELSE d.cancelled_at END,
        -- How the dependencies ended, for the step to read (a batch callback's counts).
        meta = CASE WHEN v.counts IS NULL THEN d.meta ELSE d.meta || jsonb_build_object('deps_ended', v.counts) END
    FROM verdicts AS v, clock
    WHERE d.id = v.id AND {waiting_step}
    RETURNING d.id, d.state::text AS state, d.queue
),
notified AS (
    SELECT pg_notify(%(channel)s, jsonb_build_object('queue', queue)::text)
    FROM (SELECT DISTINCT queue FROM settled WHERE state = 'available') AS queues
)
