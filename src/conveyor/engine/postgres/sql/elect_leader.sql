-- Take or renew the leadership lease of %(name)s. One statement covers every case: no leader yet
-- (insert), we lead (renew), someone else leads but their lease ran out (take over). A live lease
-- held by another node is left alone and nothing is returned, unless %(take_from_foreign)s and that
-- node is another runtime's (oban-py): it has producer rows and none of them is Conveyor's. A
-- mixed fleet is then led by a Conveyor node, which rescues by heartbeats rather than by age.
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
RETURNING node, elected_at;
