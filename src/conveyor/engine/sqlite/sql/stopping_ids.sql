(
    SELECT e.value
    FROM oban_producers AS p, json_each(
        coalesce(CASE WHEN json_valid(p.meta) THEN CASE
            WHEN json_type(p.meta, '$.stopping') = 'array' THEN p.meta ->> '$.stopping'
        END END, '[]')
    ) AS e
    WHERE e.type = 'integer'
)
