DELETE FROM conveyor_queue_starts WHERE queue = :queue AND started_at <= :forget_before;
