-- The last id and the size of the next page of suspended workflow steps after %(after)s
-- (sweep_steps.sql settles the same page).
SELECT max(id), count(*) FROM (
    SELECT d.id FROM {prefix}.oban_jobs AS d
    WHERE {waiting_step} AND jsonb_typeof(d.meta) = 'object' AND d.id > %(after)s
    ORDER BY d.id
    LIMIT %(limit)s
) AS page;
