NOT EXISTS (
    SELECT 1 FROM json_each(:ended) AS e
    WHERE e.value ->> 0 = x.id AND e.value ->> 1 = x.attempt
)
AND coalesce(CASE WHEN json_valid(x.attempted_by) THEN x.attempted_by ->> 1 END, '') NOT IN (
    SELECT uuid FROM oban_producers
    WHERE updated_at < :dead_before AND {own_producer} AND uuid <> :producer
)
