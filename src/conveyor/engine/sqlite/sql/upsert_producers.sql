-- Register or refresh this node's producers: one row per running queue, kept fresh by heartbeats.
-- A producer whose row goes stale is dead, and the leader rescues its executing jobs. (WHERE true
-- tells SQLite's parser that ON CONFLICT belongs to the INSERT, not to a join.)
-- meta.stopping lists the jobs a cancel stopped while this producer ran them (stop_listed.sql): it
-- keeps those its node still runs (the record's holding ids) and forgets the others.
INSERT INTO oban_producers AS p (uuid, name, node, queue, meta, started_at, updated_at)
SELECT value ->> 'uuid', :name, :node, value ->> 'queue', value ->> 'meta', :now, :now
FROM json_each(:producers)
WHERE true
ON CONFLICT (uuid) DO UPDATE
SET meta = CASE
        WHEN CASE WHEN json_valid(p.meta) THEN json_type(p.meta, '$.stopping') END = 'array' THEN (
            SELECT CASE WHEN count(*) = 0 THEN excluded.meta
                ELSE json_set(excluded.meta, '$.stopping', json_group_array(e.value)) END
            FROM json_each(p.meta, '$.stopping') AS e
            WHERE e.value IN (
                SELECT h.value FROM json_each(:producers) AS r, json_each(r.value, '$.holding') AS h
                WHERE r.value ->> 'uuid' = p.uuid
            )
        )
        ELSE excluded.meta
    END,
    updated_at = excluded.updated_at;
