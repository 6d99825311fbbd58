-- The producer rows of a leader's node: whether each is Conveyor's (meta.runtime), its instance
-- and its last heartbeat, for the foreign and stale takeover rules of elect_leader.
SELECT name, COALESCE(JSON_VALUE(meta, '$.runtime') = 'conveyor', 0), updated_at
FROM {prefix}.oban_producers
WHERE node = %(node)s;
