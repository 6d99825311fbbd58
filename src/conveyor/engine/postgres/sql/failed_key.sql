greatest(scheduled_at, completed_at, discarded_at, cancelled_at)
