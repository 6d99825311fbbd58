-- The lease of a name, locked: elect_leader decides in its transaction whether to renew it, take it
-- over, or leave it.
SELECT node, started_at, expires_at FROM {prefix}.oban_peers WHERE name = %(name)s FOR UPDATE;
