-- How many final jobs a prune with this policy would delete, by state: what repeated passes of
-- prune_by_age.sql and prune_by_count.sql converge to, judged over every final job at once. A job
-- goes when its governing rule (the first of %(rules)s that matches, in precedence order; none:
-- the defaults) finds it too old; else when it is not among the newest that rule keeps of its
-- young jobs (the defaults count per queue); else when it is not among the newest %(max_rows)s
-- of the jobs that survive both.
WITH clock AS (
    SELECT coalesce(%(now)s::timestamp, timezone('UTC', now())) AS now
),
rules AS (
    SELECT * FROM jsonb_to_recordset(%(rules)s::jsonb)
        AS r(rank int, queue text, worker text, states text[], max_age float8, max_rows bigint)
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
              AND j.state::text = ANY (r.states)
            ORDER BY r.rank LIMIT 1) AS rank
    FROM {prefix}.oban_jobs AS j
    WHERE j.state IN ('completed', 'cancelled', 'discarded')
      AND NOT {spared}
),
judged AS (
    SELECT f.id, f.state, f.queue, f.rank,
           coalesce(f.ended_at < c.now - make_interval(
               secs => CASE WHEN f.rank IS NULL THEN %(max_age)s::float8 ELSE r.max_age END
           ), false) AS aged,
           CASE WHEN f.rank IS NULL THEN %(keep_per_queue)s::bigint ELSE r.max_rows END AS keep
    FROM final AS f CROSS JOIN clock AS c LEFT JOIN rules AS r ON r.rank = f.rank
),
capped AS (
    SELECT id, state, aged OR (keep IS NOT NULL AND row_number() OVER (
        PARTITION BY aged, rank, CASE WHEN rank IS NULL THEN queue END ORDER BY id DESC
    ) > keep) AS doomed
    FROM judged
),
trimmed AS (
    SELECT state, doomed OR (%(max_rows)s::bigint IS NOT NULL AND row_number() OVER (
        PARTITION BY doomed ORDER BY id DESC
    ) > %(max_rows)s::bigint) AS doomed
    FROM capped
)
SELECT state::text, count(*) FROM trimmed WHERE doomed GROUP BY state;
