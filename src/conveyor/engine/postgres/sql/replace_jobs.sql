-- Unique jobs with `replace` (conveyor/unique.py): copy chosen fields of the requests that conflicted
-- onto the stored jobs they met. Each record names, by state, the fields to take; a job found in a
-- state the record does not name is left as it is. Replaced meta keeps the stored job's unique
-- markers. A new scheduled_at in the future makes an available job scheduled (the stager brings a
-- scheduled job whose new time has come back to available).
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
    SELECT input.*, coalesce(input.replace -> (j.state::text), '[]') AS fields
    FROM input JOIN {prefix}.oban_jobs AS j ON j.id = input.id
)
UPDATE {prefix}.oban_jobs AS j
SET args = CASE WHEN c.fields ? 'args' THEN c.args ELSE j.args END,
    meta = CASE WHEN c.fields ? 'meta' THEN c.meta || jsonb_strip_nulls(jsonb_build_object(
        'uniq_key', j.meta -> 'uniq_key', 'uniq_states', j.meta -> 'uniq_states'
    )) ELSE j.meta END,
    queue = CASE WHEN c.fields ? 'queue' THEN c.queue ELSE j.queue END,
    tags = CASE WHEN c.fields ? 'tags' THEN c.tags ELSE j.tags END,
    priority = CASE WHEN c.fields ? 'priority' THEN c.priority ELSE j.priority END,
    max_attempts = CASE WHEN c.fields ? 'max_attempts' THEN c.max_attempts ELSE j.max_attempts END,
    scheduled_at = CASE WHEN c.fields ? 'scheduled_at' THEN c.run_at ELSE j.scheduled_at END,
    state = CASE
        WHEN c.fields ? 'scheduled_at' AND j.state = 'available' AND c.run_at > clock.now THEN 'scheduled'
        ELSE j.state
    END
FROM chosen AS c, clock
WHERE j.id = c.id AND c.fields <> '[]'
RETURNING j.id;
