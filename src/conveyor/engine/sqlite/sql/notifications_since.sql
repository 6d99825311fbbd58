SELECT id, channel, payload, source FROM conveyor_notifications WHERE id > ? ORDER BY id;
