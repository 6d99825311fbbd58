-- Delete matching jobs, except executing ones: their node still owns them.
WITH targets AS (
    SELECT id FROM {prefix}.oban_jobs
    WHERE {filter}
      AND state <> 'executing'
    ORDER BY id
    LIMIT %(limit)s
    FOR UPDATE
)
DELETE FROM {prefix}.oban_jobs AS j
USING targets
WHERE j.id = targets.id
RETURNING j.id;
