-- Declare a queue, or replace its declaration.
INSERT INTO {prefix}.oban_queues AS q (name, opts, "only")
VALUES (%(name)s, %(opts)s::jsonb, %(only)s::jsonb)
ON CONFLICT (name) DO UPDATE
SET opts = excluded.opts, "only" = excluded."only", lock_version = q.lock_version + 1,
    updated_at = timezone('UTC', now());
