SELECT queue, paused, local_limit FROM conveyor_queue_states WHERE name = :name;
