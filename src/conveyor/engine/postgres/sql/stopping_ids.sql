ARRAY(
    SELECT (e.value)::text::bigint
    FROM {prefix}.oban_producers AS p
    CROSS JOIN LATERAL jsonb_array_elements(
        CASE WHEN jsonb_typeof(p.meta -> 'stopping') = 'array' THEN p.meta -> 'stopping' ELSE '[]' END
    ) AS e
    WHERE jsonb_typeof(e.value) = 'number'
)
