scheduled_at >= %(scheduled_after)s
