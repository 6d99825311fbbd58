-- Unique jobs with `replace` (conveyor/unique.py): copy chosen fields of the requests that conflicted
-- onto the stored jobs they met, in the inserting transaction. :jobs is a JSON array of {id,
-- replace: {state: [field, ...]}, queue, args, meta, tags, priority, max_attempts, run_at}; a job found
-- in a state its record does not name is left as it is. Replaced meta keeps the stored job's unique
-- markers. A run_at after :now makes an available job scheduled.
-- A new max_attempts never strands a job (a fetch claims only attempt < max_attempts): a waiting job
-- it leaves without an attempt is discarded at once, the reason appended to its errors; a running
-- job keeps at least the attempt after the current one, since its run may still ask for a retry.
WITH input AS (
    SELECT
        value ->> 'id' AS id,
        value -> 'replace' AS replace,
        value ->> 'queue' AS queue,
        value -> 'args' AS args,
        value -> 'meta' AS meta,
        value -> 'tags' AS tags,
        value ->> 'priority' AS priority,
        value ->> 'max_attempts' AS max_attempts,
        value ->> 'run_at' AS run_at
    FROM json_each(:jobs)
),
named AS (
    SELECT input.*, coalesce(input.replace -> stored.state, '[]') AS fields, stored.attempt AS attempt,
        stored.state AS stored_state
    FROM input JOIN oban_jobs AS stored ON stored.id = input.id
),
chosen AS (
    SELECT named.*, instr(fields, '"max_attempts"') > 0 AND CAST(max_attempts AS INTEGER) <= attempt
        AND stored_state IN ('available', 'scheduled', 'retryable', 'suspended') AS exhausted
    FROM named
)
-- (No alias on the updated table: SQLite does not resolve one next to a CTE that reads the table.)
UPDATE oban_jobs
SET args = CASE WHEN instr(c.fields, '"args"') > 0 THEN c.args ELSE oban_jobs.args END,
    meta = CASE WHEN instr(c.fields, '"meta"') > 0 THEN json_set(
        c.meta, '$.uniq_key', oban_jobs.meta ->> 'uniq_key', '$.uniq_states', json(oban_jobs.meta -> 'uniq_states')
    ) ELSE oban_jobs.meta END,
    queue = CASE WHEN instr(c.fields, '"queue"') > 0 THEN c.queue ELSE oban_jobs.queue END,
    tags = CASE WHEN instr(c.fields, '"tags"') > 0 THEN c.tags ELSE oban_jobs.tags END,
    priority = CASE WHEN instr(c.fields, '"priority"') > 0 THEN c.priority ELSE oban_jobs.priority END,
    max_attempts = CASE
        WHEN instr(c.fields, '"max_attempts"') = 0 THEN oban_jobs.max_attempts
        WHEN oban_jobs.state = 'executing' THEN max(CAST(c.max_attempts AS INTEGER), oban_jobs.attempt + 1)
        ELSE c.max_attempts
    END,
    scheduled_at = CASE WHEN instr(c.fields, '"scheduled_at"') > 0 THEN c.run_at ELSE oban_jobs.scheduled_at END,
    discarded_at = CASE WHEN c.exhausted THEN :now ELSE oban_jobs.discarded_at END,
    errors = CASE WHEN c.exhausted THEN json_insert(
        CASE WHEN json_valid(oban_jobs.errors) THEN CASE WHEN json_type(oban_jobs.errors) = 'array' THEN oban_jobs.errors ELSE '[]' END ELSE '[]' END,
        '$[#]', json_object(
            'attempt', oban_jobs.attempt,
            'at', replace(:now, ' ', 'T') || '+00:00',
            'error', 'discarded: max_attempts replaced with ' || c.max_attempts || ' after ' || oban_jobs.attempt || ' attempts'
        )) ELSE oban_jobs.errors END,
    state = CASE
        WHEN c.exhausted THEN 'discarded'
        WHEN instr(c.fields, '"scheduled_at"') > 0 AND oban_jobs.state = 'available' AND c.run_at > :now THEN 'scheduled'
        ELSE oban_jobs.state
    END
FROM chosen AS c
WHERE oban_jobs.id = c.id AND c.fields <> '[]'
RETURNING oban_jobs.id;
