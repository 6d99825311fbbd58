-- Register or refresh this node's producers: one row per running queue, kept fresh by heartbeats.
-- A producer whose row goes stale is dead, and the leader rescues its executing jobs. (WHERE true
-- tells SQLite's parser that ON CONFLICT belongs to the INSERT, not to a join.)
INSERT INTO oban_producers AS p (uuid, name, node, queue, meta, started_at, updated_at)
SELECT value ->> 'uuid', :name, :node, value ->> 'queue', value ->> 'meta', :now, :now
FROM json_each(:producers)
WHERE true
ON CONFLICT (uuid) DO UPDATE
SET meta = excluded.meta, updated_at = excluded.updated_at;
