id, state, queue, worker, args, meta, tags, errors, attempt, max_attempts, priority, attempted_by,
inserted_at, scheduled_at, attempted_at, cancelled_at, completed_at, discarded_at
