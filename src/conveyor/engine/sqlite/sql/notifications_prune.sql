DELETE FROM conveyor_notifications WHERE id <= ?;
