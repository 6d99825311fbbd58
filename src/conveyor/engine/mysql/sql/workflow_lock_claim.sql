-- The workflow about to be inserted takes the lock; a row of the same id (a record kept after an
-- earlier run) is reused.
INSERT INTO {prefix}.conveyor_workflows (id, name, "lock", inserted_at)
VALUES (%(id)s, %(name)s, %(lock)s, %(now)s)
ON DUPLICATE KEY UPDATE "lock" = VALUES("lock"), name = VALUES(name);
