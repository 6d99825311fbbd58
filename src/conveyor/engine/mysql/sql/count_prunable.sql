-- How many final jobs a whole prune would delete with this policy, by state: each job judged by the
-- rule that governs it (the lowest rank of %(rules)s matching it, else the defaults), aged out by
-- its rule's cutoff, else counted out by its rule's max_rows (the defaults' keep_per_queue, queue by
-- queue), then the table's max_rows over what is left. Workflow steps spared as prune_by_age.sql.
WITH rules AS (
    SELECT r.rnk, r.queue, r.worker, r.states, r.cutoff, r.max_rows
    FROM JSON_TABLE(%(rules)s, '$[*]' COLUMNS (
        rnk INT PATH '$.rank',
        queue VARCHAR(255) PATH '$.queue',
        worker VARCHAR(255) PATH '$.worker',
        states JSON PATH '$.states',
        cutoff DATETIME(6) PATH '$.cutoff',
        max_rows BIGINT PATH '$.max_rows'
    )) AS r
),
final AS (
    SELECT j.id, j.state, j.queue,
           CASE j.state
               WHEN 'completed' THEN j.completed_at
               WHEN 'cancelled' THEN j.cancelled_at
               ELSE j.discarded_at
           END AS ended_at,
           (SELECT r.rnk FROM rules AS r
            WHERE (r.queue IS NULL OR r.queue = j.queue)
              AND (r.worker IS NULL OR r.worker = j.worker)
              AND JSON_CONTAINS(r.states, JSON_QUOTE(j.state))
            ORDER BY r.rnk LIMIT 1) AS rnk
    FROM {prefix}.oban_jobs AS j
    WHERE j.state IN ('completed', 'cancelled', 'discarded')
      AND NOT {spared}
),
judged AS (
    SELECT f.id, f.state, f.queue, f.rnk,
           COALESCE(f.ended_at < CASE WHEN f.rnk IS NULL THEN %(cutoff)s ELSE r.cutoff END, 0) AS aged,
           CASE WHEN f.rnk IS NULL THEN %(keep_per_queue)s ELSE r.max_rows END AS keep
    FROM final AS f LEFT JOIN rules AS r ON r.rnk = f.rnk
),
capped AS (
    SELECT id, state, aged OR (keep IS NOT NULL AND ROW_NUMBER() OVER (
        PARTITION BY aged, rnk, CASE WHEN rnk IS NULL THEN queue END ORDER BY id DESC
    ) > keep) AS doomed
    FROM judged
),
trimmed AS (
    SELECT state, doomed OR (%(max_rows)s IS NOT NULL AND ROW_NUMBER() OVER (
        PARTITION BY doomed ORDER BY id DESC
    ) > %(max_rows)s) AS doomed
    FROM capped
)
SELECT state, COUNT(*) FROM trimmed WHERE doomed GROUP BY state;
