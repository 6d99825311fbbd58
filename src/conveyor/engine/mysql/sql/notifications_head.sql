SELECT COALESCE(MAX(id), 0) FROM {prefix}.conveyor_notifications;
