-- A stored step gains dependents (steps added to its workflow later): :names, a JSON array.
UPDATE oban_jobs
SET meta = json_set(
    meta, '$.dependents',
    json((SELECT json_group_array(value) FROM (
        SELECT value FROM json_each(CASE WHEN json_type(meta, '$.dependents') = 'array' THEN meta -> '$.dependents' ELSE '[]' END)
        UNION ALL
        SELECT value FROM json_each(:names)
    )))
)
WHERE id = :id;
