-- Cancelled runs of a queue that still go on (listed in their producer's meta.stopping): each keeps
-- its slot of the global limit until its producer lets go.
SELECT COUNT(*)
FROM {prefix}.oban_producers AS p,
    JSON_TABLE(p.meta, '$.stopping[*]' COLUMNS (id BIGINT PATH '$' NULL ON ERROR)) AS s,
    {prefix}.oban_jobs AS x
WHERE x.id = s.id AND x.state <> 'executing' AND x.queue = %(queue)s;
