DELETE FROM conveyor_rate_starts WHERE queue = :queue AND started_at <= :forget_before;
