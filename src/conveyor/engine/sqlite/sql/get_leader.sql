SELECT node, elected_at, expires_at
FROM oban_leaders
WHERE name = :name AND expires_at >= :now;
