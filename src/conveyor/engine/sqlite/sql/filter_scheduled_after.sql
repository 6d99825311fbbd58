scheduled_at >= :scheduled_after
