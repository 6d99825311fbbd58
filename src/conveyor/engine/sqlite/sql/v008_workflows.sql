-- Migration 8: workflows (conveyor/workflow.py). A step is found by its workflow and name (a name is
-- unique within its workflow: migration 10 replaces the first index below with a unique one), and the suspended steps of a workflow by the workflow alone. The
-- expressions are repeated word for word by the statements that use them (SQLite uses an
-- expression index only for the same expression).
CREATE INDEX IF NOT EXISTS conveyor_workflow_steps_index
ON oban_jobs (
    (CASE WHEN json_valid(meta) THEN meta ->> 'workflow_id' END),
    (CASE WHEN json_valid(meta) THEN meta ->> 'name' END)
)
WHERE (CASE WHEN json_valid(meta) THEN meta ->> 'workflow_id' IS NOT NULL ELSE 0 END);
CREATE INDEX IF NOT EXISTS conveyor_workflow_waiting_index
ON oban_jobs ((CASE WHEN json_valid(meta) THEN meta ->> 'workflow_id' END))
WHERE state = 'suspended';
