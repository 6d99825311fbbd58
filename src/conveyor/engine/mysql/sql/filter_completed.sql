(state = 'completed'
  AND (%(completed_after)s IS NULL OR completed_at >= %(completed_after)s)
  AND (%(completed_before)s IS NULL OR completed_at < %(completed_before)s))
