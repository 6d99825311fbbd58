-- The workflow about to be inserted takes the lock (no unfinished holder is left: see
-- workflow_lock_holder.sql). A row of the same id (a record kept after an earlier run) is reused.
INSERT INTO {prefix}.conveyor_workflows AS w (id, name, lock, inserted_at)
VALUES (%(id)s, %(name)s, %(lock)s, %(now)s)
ON CONFLICT (id) DO UPDATE SET lock = EXCLUDED.lock, name = EXCLUDED.name;
