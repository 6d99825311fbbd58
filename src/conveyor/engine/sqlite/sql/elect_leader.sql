-- Take or renew the leadership lease of :name. One statement covers every case: no leader yet
-- (insert), we lead (renew), someone else leads but their lease ran out (take over). A live lease
-- held by another node is left alone and nothing is returned, unless :take_from_foreign and that
-- node is another runtime's: it has producer rows and none of them is Conveyor's (see the
-- PostgreSQL statement; on SQLite only a test writes such rows). Given :stale_before, a live lease
-- is also taken from a Conveyor node whose producer rows of this instance are all older than that
-- (killed or frozen while leading: see the PostgreSQL statement).
INSERT INTO oban_leaders AS l (name, node, elected_at, expires_at)
VALUES (:name, :node, :now, :expires_at)
ON CONFLICT (name) DO UPDATE
SET node = excluded.node,
    elected_at = CASE WHEN l.node = excluded.node THEN l.elected_at ELSE excluded.elected_at END,
    expires_at = excluded.expires_at
WHERE l.node = excluded.node
   OR l.expires_at < excluded.elected_at
   OR (
    :take_from_foreign
    AND EXISTS (SELECT 1 FROM oban_producers WHERE node = l.node AND coalesce({own_producer}, 0) = 0)
    AND NOT EXISTS (SELECT 1 FROM oban_producers WHERE node = l.node AND {own_producer})
   )
   OR (
    :stale_before IS NOT NULL
    AND EXISTS (SELECT 1 FROM oban_producers WHERE node = l.node AND name = l.name AND {own_producer})
    AND NOT EXISTS (
        SELECT 1 FROM oban_producers
        WHERE node = l.node AND name = l.name AND {own_producer} AND updated_at >= :stale_before
    )
   )
RETURNING node, elected_at;
