-- Give up the lease (a clean stop); the engine announces it on the leader channel so another node
-- takes over at once.
DELETE FROM oban_leaders
WHERE name = :name AND node = :node
RETURNING name, node;
