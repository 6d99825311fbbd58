scheduled_at < %(scheduled_before)s
