-- The job of a claimed cron tick: available now.
INSERT INTO oban_jobs (
    state, queue, worker, args, meta, tags, priority, max_attempts, scheduled_at, inserted_at
) VALUES ('available', :queue, :worker, :args, :meta, :tags, :priority, :max_attempts, :now, :now)
RETURNING id;
