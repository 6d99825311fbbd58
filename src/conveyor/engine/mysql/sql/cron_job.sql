-- The job of a claimed cron tick: available at once.
INSERT INTO {prefix}.oban_jobs (
    state, queue, worker, args, meta, tags, priority, max_attempts, scheduled_at, inserted_at
) VALUES (
    'available', %(queue)s, %(worker)s, %(args)s, %(meta)s, %(tags)s, %(priority)s,
    %(max_attempts)s, %(now)s, %(now)s
);
