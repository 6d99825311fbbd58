-- Every producer row: whether it is Conveyor's (meta.runtime) and its last heartbeat; rescue_jobs
-- tells the dead from the live by the timeout of each kind.
SELECT uuid, COALESCE(JSON_VALUE(meta, '$.runtime') = 'conveyor', 0), updated_at
FROM {prefix}.oban_producers;
