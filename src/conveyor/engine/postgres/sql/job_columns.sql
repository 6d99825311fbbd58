id, state, queue, worker, args, meta, tags, errors, attempt, max_attempts, priority, attempted_by,
inserted_at AT TIME ZONE 'UTC' AS inserted_at, scheduled_at AT TIME ZONE 'UTC' AS scheduled_at,
attempted_at AT TIME ZONE 'UTC' AS attempted_at, cancelled_at AT TIME ZONE 'UTC' AS cancelled_at,
completed_at AT TIME ZONE 'UTC' AS completed_at, discarded_at AT TIME ZONE 'UTC' AS discarded_at
