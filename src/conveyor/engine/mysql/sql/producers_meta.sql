-- The stored meta of some producers, locked: record_producers keeps what their beats still hold of
-- the jobs a cancel stopped (meta.stopping).
SELECT uuid, meta FROM {prefix}.oban_producers WHERE uuid IN %(uuids)s FOR UPDATE;
