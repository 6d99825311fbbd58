-- Give up the lease (a clean stop) and announce it so another node takes over at once.
WITH resigned AS (
    DELETE FROM {prefix}.oban_leaders
    WHERE name = %(name)s AND node = %(node)s
    RETURNING name, node
)
SELECT name, pg_notify(%(leader_channel)s, jsonb_build_object('action', 'resign', 'node', node, 'name', name)::text)
FROM resigned;
