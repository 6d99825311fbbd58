-- Unique jobs with `replace` (conveyor/unique.py): copy chosen fields of the requests that conflicted
-- onto the stored jobs they met. Each record names, by state, the fields to take; a job found in a
-- state the record does not name is left as it is. Replaced meta keeps the stored job's unique
-- markers. A new scheduled_at in the future makes an available job scheduled (the stager brings a
-- scheduled job whose new time has come back to available).
-- A new max_attempts never strands a job (a fetch claims only attempt < max_attempts): a waiting job
-- it leaves without an attempt is discarded at once, the reason appended to its errors (by the
-- fragment for the column's type, as in ack_jobs.sql); a running job keeps at least the attempt
-- after the current one, since its run may still ask for a retry.
WITH clock AS (
    SELECT coalesce(%(now)s::timestamp, timezone('UTC', now())) AS now
),
input AS (
    SELECT r.*, coalesce(r.scheduled_at, clock.now + make_interval(secs => coalesce(r.schedule_in, 0))) AS run_at
    FROM clock, jsonb_to_recordset(%(jobs)s::jsonb) AS r(
        id bigint, replace jsonb, queue text, args jsonb, meta jsonb, tags text[], priority smallint,
        max_attempts smallint, scheduled_at timestamp, schedule_in double precision
    )
),
chosen AS (
    SELECT input.*, f.fields, e.exhausted, CASE WHEN e.exhausted THEN jsonb_build_object(
        'attempt', j.attempt,
        'at', to_char(clock.now, 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"'),
        'error', 'discarded: max_attempts replaced with ' || input.max_attempts || ' after ' || j.attempt || ' attempts'
    ) END AS error
    FROM input JOIN {prefix}.oban_jobs AS j ON j.id = input.id, clock,
    LATERAL (SELECT coalesce(input.replace -> (j.state::text), '[]') AS fields) AS f,
    LATERAL (SELECT f.fields ? 'max_attempts' AND input.max_attempts <= j.attempt
        AND j.state::text IN ('available', 'scheduled', 'retryable', 'suspended') AS exhausted) AS e
)
UPDATE {prefix}.oban_jobs AS j
SET args = CASE WHEN a.fields ? 'args' THEN a.args ELSE j.args END,
    meta = CASE WHEN a.fields ? 'meta' THEN a.meta || jsonb_strip_nulls(jsonb_build_object(
        'uniq_key', j.meta -> 'uniq_key', 'uniq_states', j.meta -> 'uniq_states'
    )) ELSE j.meta END,
    queue = CASE WHEN a.fields ? 'queue' THEN a.queue ELSE j.queue END,
    tags = CASE WHEN a.fields ? 'tags' THEN a.tags ELSE j.tags END,
    priority = CASE WHEN a.fields ? 'priority' THEN a.priority ELSE j.priority END,
    max_attempts = CASE
        WHEN NOT a.fields ? 'max_attempts' THEN j.max_attempts
        WHEN j.state::text = 'executing' THEN greatest(a.max_attempts, j.attempt + 1)
        ELSE a.max_attempts
    END,
    scheduled_at = CASE WHEN a.fields ? 'scheduled_at' THEN a.run_at ELSE j.scheduled_at END,
    discarded_at = CASE WHEN a.exhausted THEN clock.now ELSE j.discarded_at END,
    errors = CASE WHEN a.exhausted THEN {append_error} ELSE j.errors END,
    state = CASE
        WHEN a.exhausted THEN 'discarded'
        WHEN a.fields ? 'scheduled_at' AND j.state = 'available' AND a.run_at > clock.now THEN 'scheduled'
        ELSE j.state
    END
FROM chosen AS a, clock
WHERE j.id = a.id AND a.fields <> '[]'
RETURNING j.id;
