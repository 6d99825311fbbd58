-- Migration 11: a row per workflow that needs one, in a table of Conveyor's own (oban_jobs is left
-- as Oban lays it out). A row holds a workflow's lock (Workflow(lock=...): one unfinished workflow
-- per lock) while it is unfinished, and, once the workflow's steps are pruned, the compact record
-- of how it ended, kept by its own retention rule. Times are UTC text, as oban_jobs' here.
CREATE TABLE IF NOT EXISTS conveyor_workflows (
    id TEXT PRIMARY KEY,
    name TEXT,
    lock TEXT,
    state TEXT,
    failed_step TEXT,
    counts TEXT,
    inserted_at TEXT NOT NULL,
    finished_at TEXT
);
CREATE UNIQUE INDEX IF NOT EXISTS conveyor_workflow_locks_index
ON conveyor_workflows (lock) WHERE lock IS NOT NULL;
CREATE INDEX IF NOT EXISTS conveyor_workflow_records_index
ON conveyor_workflows (finished_at) WHERE finished_at IS NOT NULL;
