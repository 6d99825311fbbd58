max(scheduled_at, coalesce(completed_at, ''), coalesce(discarded_at, ''), coalesce(cancelled_at, ''))
