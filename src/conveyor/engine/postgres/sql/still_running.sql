NOT EXISTS (
    SELECT 1 FROM unnest(%(ended_ids)s::bigint[], %(ended_attempts)s::integer[]) AS e(id, attempt)
    WHERE e.id = x.id AND e.attempt = x.attempt
)
