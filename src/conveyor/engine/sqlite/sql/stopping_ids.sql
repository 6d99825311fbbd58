(
    SELECT e.value
    FROM oban_producers AS p, json_each(
        CASE WHEN json_valid(p.meta) AND json_type(p.meta, '$.stopping') = 'array' THEN p.meta ->> '$.stopping' ELSE '[]' END
    ) AS e
    WHERE e.type = 'integer'
)
