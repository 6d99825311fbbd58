(
    SELECT * FROM {prefix}.oban_jobs AS x
    WHERE state = 'executing' AND queue = %(queue)s AND {still_running}
    UNION ALL
    SELECT * FROM {prefix}.oban_jobs AS x
    WHERE x.id = ANY((SELECT ids FROM stopping)::bigint[]) AND x.state::text <> 'executing' AND x.queue = %(queue)s
)
