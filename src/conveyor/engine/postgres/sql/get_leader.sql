SELECT node, elected_at, expires_at
FROM {prefix}.oban_leaders
WHERE name = %(name)s AND expires_at >= coalesce(%(now)s::timestamp, timezone('UTC', now()));
