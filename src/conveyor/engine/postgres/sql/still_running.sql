(x.id, x.attempt) NOT IN (SELECT * FROM unnest(%(ended_ids)s::bigint[], %(ended_attempts)s::int[]))
AND coalesce(x.attempted_by[2], '') <> ALL(ARRAY(
    SELECT p.uuid::text FROM {prefix}.oban_producers AS p
    WHERE p.updated_at < (SELECT now FROM clock) - make_interval(secs => %(dead_after)s::float8)
      AND p.meta ->> 'runtime' = 'conveyor' AND p.uuid::text <> %(producer)s
))
