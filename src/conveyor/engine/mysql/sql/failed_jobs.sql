(attempt > 1 OR (attempt = 1 AND state NOT IN ('executing', 'completed', 'discarded', 'cancelled')))
