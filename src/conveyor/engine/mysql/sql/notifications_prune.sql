-- Notifications older than a minute: every listener has read them long ago.
DELETE FROM {prefix}.conveyor_notifications WHERE created_at < %s LIMIT 10000;
