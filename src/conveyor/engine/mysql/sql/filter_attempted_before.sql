attempted_at < %(attempted_before)s
