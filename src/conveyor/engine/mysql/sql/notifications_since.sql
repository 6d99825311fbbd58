-- The notifications written after the last one a listener saw, in order.
SELECT id, channel, payload FROM {prefix}.conveyor_notifications
WHERE id > %s
ORDER BY id
LIMIT 1000;
