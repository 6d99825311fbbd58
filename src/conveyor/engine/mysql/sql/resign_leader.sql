-- Give up the lease (a clean stop); the engine announces it on the leader channel so another node
-- takes over at once.
DELETE FROM {prefix}.oban_peers WHERE name = %(name)s AND node = %(node)s;
