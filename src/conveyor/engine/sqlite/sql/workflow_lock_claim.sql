-- The workflow about to be inserted takes the lock; a row of the same id (a record kept after an
-- earlier run) is reused.
INSERT INTO conveyor_workflows (id, name, lock, inserted_at)
VALUES (:id, :name, :lock, :now)
ON CONFLICT (id) DO UPDATE SET lock = excluded.lock, name = excluded.name;
