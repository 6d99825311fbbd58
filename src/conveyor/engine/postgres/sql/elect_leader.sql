-- Take or renew the leadership lease of %(name)s. One statement covers every case: no leader yet
-- (insert), we lead (renew), someone else leads but their lease ran out (take over). A live lease
-- held by another node is left alone and nothing is returned, unless %(take_from_foreign)s and that
-- node is another runtime's (oban-py): it has producer rows and none of them is Conveyor's. A
-- mixed fleet is then led by a Conveyor node, which rescues by heartbeats rather than by age.
-- Given %(stale_after)s, a live lease is also taken from a Conveyor node whose heartbeats stopped:
-- it has producer rows of this instance and all are older than that (killed or frozen while
-- leading). Its lease would otherwise hold the leader's duties, rescue first, for up to a whole TTL.
WITH clock AS (
    SELECT coalesce(%(now)s::timestamp, timezone('UTC', now())) AS now
)
INSERT INTO {prefix}.oban_leaders AS l (name, node, elected_at, expires_at)
SELECT %(name)s, %(node)s, clock.now, clock.now + make_interval(secs => %(ttl)s)
FROM clock
ON CONFLICT (name) DO UPDATE
SET node = excluded.node,
    elected_at = CASE WHEN l.node = excluded.node THEN l.elected_at ELSE excluded.elected_at END,
    expires_at = excluded.expires_at
WHERE l.node = excluded.node
   OR l.expires_at < excluded.elected_at
   OR (
    %(take_from_foreign)s::boolean
    AND EXISTS (
        SELECT 1 FROM {prefix}.oban_producers AS p
        WHERE p.node = l.node AND (p.meta ->> 'runtime') IS DISTINCT FROM 'conveyor'
    )
    AND NOT EXISTS (
        SELECT 1 FROM {prefix}.oban_producers AS p
        WHERE p.node = l.node AND p.meta ->> 'runtime' = 'conveyor'
    )
   )
   OR (
    %(stale_after)s::float8 IS NOT NULL
    AND EXISTS (
        SELECT 1 FROM {prefix}.oban_producers AS p
        WHERE p.node = l.node AND p.name = l.name AND p.meta ->> 'runtime' = 'conveyor'
    )
    AND NOT EXISTS (
        SELECT 1 FROM {prefix}.oban_producers AS p
        WHERE p.node = l.node AND p.name = l.name AND p.meta ->> 'runtime' = 'conveyor'
          AND p.updated_at >= excluded.elected_at - make_interval(secs => %(stale_after)s::float8)
    )
   )
RETURNING node, elected_at;
