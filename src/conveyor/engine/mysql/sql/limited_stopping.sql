-- Cancelled runs of a queue that still go on (listed in their producer's meta.stopping), by the
-- partition of the global limit each counts against: each keeps its slot until its producer lets go.
SELECT {global_key}, COUNT(*)
FROM {prefix}.oban_jobs
WHERE state <> 'executing' AND queue = %(queue)s AND id IN (
    SELECT s.id
    FROM {prefix}.oban_producers AS p,
        JSON_TABLE(p.meta, '$.stopping[*]' COLUMNS (id BIGINT PATH '$' NULL ON ERROR)) AS s
)
GROUP BY 1;
