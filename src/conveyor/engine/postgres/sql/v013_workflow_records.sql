-- Migration 11: a row per workflow that needs one, in a table of Conveyor's own (oban_jobs is left
-- as Oban lays it out, so a shared database stays readable by Oban; Oban Pro 1.7 also keeps its
-- workflows' data in a table of its own). A row holds a workflow's lock (Workflow(lock=...): one
-- unfinished workflow per lock) while it is unfinished, and, once the workflow's steps are pruned,
-- the compact record of how it ended (state, counts by step state, the failed step), kept by its
-- own retention rule. Times are UTC without a zone, as Oban's.
CREATE TABLE IF NOT EXISTS {prefix}.conveyor_workflows (
    id text PRIMARY KEY,
    name text,
    lock text,
    state text,
    failed_step text,
    counts jsonb,
    inserted_at timestamp without time zone NOT NULL,
    finished_at timestamp without time zone
);
-- One holder per lock: the enqueue clears a finished holder's lock before it takes the lock.
CREATE UNIQUE INDEX IF NOT EXISTS conveyor_workflow_locks_index
ON {prefix}.conveyor_workflows (lock) WHERE lock IS NOT NULL;
-- The records the pruner deletes by age.
CREATE INDEX IF NOT EXISTS conveyor_workflow_records_index
ON {prefix}.conveyor_workflows (finished_at) WHERE finished_at IS NOT NULL;
