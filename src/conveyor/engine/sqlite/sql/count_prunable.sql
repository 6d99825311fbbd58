-- How many final jobs a prune with this policy would delete, by state: what repeated passes of
-- prune_by_age.sql and prune_by_count.sql converge to, judged over every final job at once. A job
-- goes when its governing rule (the first of :rules that matches, in precedence order; none: the
-- defaults) finds it too old (each rule carries its cut-off); else when it is not among the newest
-- that rule keeps of its young jobs (the defaults count per queue); else when it is not among the
-- newest :max_rows of the jobs that survive both.
WITH rules AS (
    SELECT r.value ->> 'rank' AS rank, r.value ->> 'queue' AS queue, r.value ->> 'worker' AS worker,
           r.value -> 'states' AS states, r.value ->> 'cutoff' AS cutoff, r.value ->> 'max_rows' AS max_rows
    FROM json_each(:rules) AS r
),
final AS (
    SELECT j.id, j.state, j.queue,
           CASE j.state
               WHEN 'completed' THEN j.completed_at
               WHEN 'cancelled' THEN j.cancelled_at
               ELSE j.discarded_at
           END AS ended_at,
           (SELECT r.rank FROM rules AS r
            WHERE (r.queue IS NULL OR r.queue = j.queue)
              AND (r.worker IS NULL OR r.worker = j.worker)
              AND EXISTS (SELECT 1 FROM json_each(r.states) AS s WHERE s.value = j.state)
            ORDER BY r.rank LIMIT 1) AS rank
    FROM oban_jobs AS j
    WHERE j.state IN ('completed', 'cancelled', 'discarded')
      AND NOT {spared}
),
judged AS (
    SELECT f.id, f.state, f.queue, f.rank,
           coalesce(f.ended_at < CASE WHEN f.rank IS NULL THEN :cutoff ELSE r.cutoff END, 0) AS aged,
           CASE WHEN f.rank IS NULL THEN :keep_per_queue ELSE r.max_rows END AS keep
    FROM final AS f LEFT JOIN rules AS r ON r.rank = f.rank
),
capped AS (
    SELECT id, state, aged OR (keep IS NOT NULL AND row_number() OVER (
        PARTITION BY aged, rank, CASE WHEN rank IS NULL THEN queue END ORDER BY id DESC
    ) > keep) AS doomed
    FROM judged
),
trimmed AS (
    SELECT state, doomed OR (:max_rows IS NOT NULL AND row_number() OVER (
        PARTITION BY doomed ORDER BY id DESC
    ) > :max_rows) AS doomed
    FROM capped
)
SELECT state, count(*) FROM trimmed WHERE doomed GROUP BY state;
