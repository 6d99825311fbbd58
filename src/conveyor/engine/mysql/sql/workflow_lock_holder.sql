-- The unfinished workflow holding a lock (after workflow_lock_release.sql).
SELECT id FROM {prefix}.conveyor_workflows WHERE "lock" = %(lock)s;
