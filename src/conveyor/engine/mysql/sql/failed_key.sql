GREATEST(scheduled_at, COALESCE(completed_at, scheduled_at), COALESCE(discarded_at, scheduled_at), COALESCE(cancelled_at, scheduled_at))
