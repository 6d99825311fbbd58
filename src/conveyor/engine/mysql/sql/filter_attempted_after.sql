attempted_at >= %(attempted_after)s
