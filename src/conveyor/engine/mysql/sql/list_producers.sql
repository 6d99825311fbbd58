SELECT uuid, name, node, queue, meta, started_at, updated_at
FROM {prefix}.oban_producers
ORDER BY node, queue;
