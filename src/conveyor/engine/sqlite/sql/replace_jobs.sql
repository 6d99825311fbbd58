-- Unique jobs with `replace` (conveyor/unique.py): copy chosen fields of the requests that conflicted
-- onto the stored jobs they met, in the inserting transaction. :jobs is a JSON array of {id,
-- replace: {state: [field, ...]}, queue, args, meta, tags, priority, max_attempts, run_at}; a job found
-- in a state its record does not name is left as it is. Replaced meta keeps the stored job's unique
-- markers. A run_at after :now makes an available job scheduled.
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
chosen AS (
    SELECT input.*, coalesce(input.replace -> stored.state, '[]') AS fields
    FROM input JOIN oban_jobs AS stored ON stored.id = input.id
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
    max_attempts = CASE WHEN instr(c.fields, '"max_attempts"') > 0 THEN c.max_attempts ELSE oban_jobs.max_attempts END,
    scheduled_at = CASE WHEN instr(c.fields, '"scheduled_at"') > 0 THEN c.run_at ELSE oban_jobs.scheduled_at END,
    state = CASE
        WHEN instr(c.fields, '"scheduled_at"') > 0 AND oban_jobs.state = 'available' AND c.run_at > :now THEN 'scheduled'
        ELSE oban_jobs.state
    END
FROM chosen AS c
WHERE oban_jobs.id = c.id AND c.fields <> '[]'
RETURNING oban_jobs.id;
