-- The WHERE condition of a JobFilter (jobs.filter_params gives its parameters; a criterion left out
-- is NULL, or every_state for the states). Each state is a condition of its own on a literal: a
-- statement planned with its values keeps only the states asked for, which the planner estimates
-- from its statistics and which the partial indexes of completed, discarded and cancelled jobs
-- match. A list of states cast to the enum would stay an expression to the planner (the cast is
-- not immutable) estimated at 40 percent of the table: a count of the available jobs of one worker
-- read the whole table (4 s on 10 million rows) instead of the fetch index.
-- A worker suffix is matched by a LIKE pattern (jobs.filter_params escapes the suffix): the planner
-- estimates a pattern from the worker column's statistics, where it took right(worker, n) for a
-- half per cent of the rows whatever the suffix (count_jobs(estimate=True) answers from that).
(%(ids)s::bigint[] IS NULL OR id = ANY(%(ids)s::bigint[]))
AND (
    %(every_state)s::boolean
    OR (%(state_available)s::boolean AND state = 'available')
    OR (%(state_scheduled)s::boolean AND state = 'scheduled')
    OR (%(state_suspended)s::boolean AND state = 'suspended')
    OR (%(state_executing)s::boolean AND state = 'executing')
    OR (%(state_retryable)s::boolean AND state = 'retryable')
    OR (%(state_completed)s::boolean AND state = 'completed')
    OR (%(state_discarded)s::boolean AND state = 'discarded')
    OR (%(state_cancelled)s::boolean AND state = 'cancelled')
)
AND (%(queues)s::text[] IS NULL OR queue = ANY(%(queues)s::text[]))
AND (%(workers)s::text[] IS NULL OR worker = ANY(%(workers)s::text[]))
AND (%(tags)s::text[] IS NULL OR tags::text[] @> %(tags)s::text[])
AND (%(before_id)s::bigint IS NULL OR id < %(before_id)s::bigint)
AND (
    %(worker_suffix)s::text IS NULL
    OR worker = %(worker_suffix)s::text
    OR worker LIKE %(worker_pattern)s::text
)
AND (%(scheduled_after)s::timestamp IS NULL OR scheduled_at >= %(scheduled_after)s::timestamp)
AND (%(scheduled_before)s::timestamp IS NULL OR scheduled_at < %(scheduled_before)s::timestamp)
AND (%(attempted_after)s::timestamp IS NULL OR attempted_at >= %(attempted_after)s::timestamp)
AND (%(attempted_before)s::timestamp IS NULL OR attempted_at < %(attempted_before)s::timestamp)
AND (%(completed_after)s::timestamp IS NULL OR (state = 'completed' AND completed_at >= %(completed_after)s::timestamp))
AND (%(completed_before)s::timestamp IS NULL OR (state = 'completed' AND completed_at < %(completed_before)s::timestamp))
AND (%(after_id)s::bigint IS NULL OR id > %(after_id)s::bigint)
AND (%(args_contains)s::jsonb IS NULL OR args @> %(args_contains)s::jsonb)
