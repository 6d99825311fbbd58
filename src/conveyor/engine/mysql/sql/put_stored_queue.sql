-- Declare a queue, or replace the declaration of that name.
INSERT INTO {prefix}.oban_queues (name, opts, "only", inserted_at, updated_at)
VALUES (%(name)s, %(opts)s, %(only)s, %(now)s, %(now)s)
ON DUPLICATE KEY UPDATE
    opts = VALUES(opts), "only" = VALUES("only"), lock_version = lock_version + 1,
    updated_at = VALUES(updated_at);
