SELECT coalesce(max(id), 0) FROM conveyor_notifications;
