SELECT queue, limits FROM conveyor_queue_limits WHERE name = :name;
