-- Register or refresh this node's producers: one row per running queue, kept fresh by heartbeats.
-- A producer whose row goes stale is dead, and the leader rescues its executing jobs.
WITH clock AS (
    SELECT coalesce(%(now)s::timestamp, timezone('UTC', now())) AS now
)
INSERT INTO {prefix}.oban_producers AS p (uuid, name, node, queue, meta, started_at, updated_at)
SELECT r.uuid, %(name)s, %(node)s, r.queue, r.meta, clock.now, clock.now
FROM clock, jsonb_to_recordset(%(producers)s::jsonb) AS r(uuid uuid, queue text, meta jsonb)
ON CONFLICT (uuid) DO UPDATE
SET meta = excluded.meta, updated_at = excluded.updated_at;
