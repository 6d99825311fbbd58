SELECT node, started_at, expires_at
FROM {prefix}.oban_peers
WHERE name = %(name)s AND expires_at >= %(now)s;
