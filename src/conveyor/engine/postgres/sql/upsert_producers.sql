-- Register or refresh this node's producers: one row per running queue, kept fresh by heartbeats.
-- A producer whose row goes stale is dead, and the leader rescues its executing jobs.
-- meta.stopping lists the jobs a cancel stopped while this producer ran them (cancel_jobs.sql): it
-- keeps those its node still runs (the record's holding ids) and forgets the others. Computed from the
-- row as locked, so an entry a cancel added an instant ago (its run still going) is never lost.
WITH clock AS (
    SELECT coalesce(%(now)s::timestamp, timezone('UTC', now())) AS now
)
INSERT INTO {prefix}.oban_producers AS p (uuid, name, node, queue, meta, started_at, updated_at)
SELECT r.uuid, %(name)s, %(node)s, r.queue, r.meta, clock.now, clock.now
FROM clock, jsonb_to_recordset(%(producers)s::jsonb) AS r(uuid uuid, queue text, meta jsonb)
ON CONFLICT (uuid) DO UPDATE
SET meta = excluded.meta || CASE WHEN jsonb_typeof(p.meta -> 'stopping') = 'array' THEN jsonb_strip_nulls(
        jsonb_build_object('stopping', (
            SELECT jsonb_agg(e.value)
            FROM jsonb_array_elements(p.meta -> 'stopping') AS e
            WHERE (
                SELECT r.holding FROM jsonb_to_recordset(%(producers)s::jsonb) AS r(uuid uuid, holding jsonb)
                WHERE r.uuid = p.uuid
            ) @> jsonb_build_array(e.value)
        ))
    ) ELSE '{}' END,
    updated_at = excluded.updated_at;
