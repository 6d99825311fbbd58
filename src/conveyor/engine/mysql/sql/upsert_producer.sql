-- Register or refresh one producer of a node: one row per running queue, kept fresh by heartbeats.
-- A producer whose row goes stale is dead, and the leader rescues its executing jobs.
INSERT INTO {prefix}.oban_producers (uuid, name, node, queue, meta, started_at, updated_at)
VALUES (%s, %s, %s, %s, %s, %s, %s)
ON DUPLICATE KEY UPDATE meta = VALUES(meta), updated_at = VALUES(updated_at);
