(
    SELECT * FROM oban_jobs AS x
    WHERE state = 'executing' AND queue = :queue AND {still_running}
    UNION ALL
    SELECT * FROM oban_jobs AS x
    WHERE x.id IN {stopping_ids} AND x.state <> 'executing' AND x.queue = :queue
)
