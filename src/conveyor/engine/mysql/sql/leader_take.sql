-- Renew the lease (same node: started_at kept) or take it over (another node: elected now).
UPDATE {prefix}.oban_peers
SET started_at = CASE WHEN node = %(node)s THEN started_at ELSE %(now)s END,
    node = %(node)s,
    expires_at = %(expires_at)s
WHERE name = %(name)s;
