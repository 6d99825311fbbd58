-- Declare a queue, or replace its declaration.
INSERT INTO oban_queues AS q (name, opts, "only")
VALUES (:name, :opts, :only)
ON CONFLICT (name) DO UPDATE
SET opts = excluded.opts, "only" = excluded."only", lock_version = q.lock_version + 1,
    updated_at = strftime('%Y-%m-%d %H:%M:%f000', 'now');
