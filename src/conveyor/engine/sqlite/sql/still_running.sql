NOT EXISTS (
    SELECT 1 FROM json_each(:ended) AS e
    WHERE e.value ->> 0 = x.id AND e.value ->> 1 = x.attempt
)
