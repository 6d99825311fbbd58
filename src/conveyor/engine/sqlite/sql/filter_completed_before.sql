state = 'completed' AND completed_at < :completed_before
