-- Migration 8: workflows. A step's workflow and name as virtual columns of Conveyor's own, and the
-- index that finds a workflow's suspended steps (migration 10 adds the unique one over names).
ALTER TABLE {prefix}.oban_jobs ADD COLUMN conveyor_workflow_id VARCHAR(255) GENERATED ALWAYS AS (
    JSON_VALUE(meta, '$.workflow_id')
) VIRTUAL;
ALTER TABLE {prefix}.oban_jobs ADD COLUMN conveyor_step_name VARCHAR(255) GENERATED ALWAYS AS (
    CASE WHEN JSON_VALUE(meta, '$.workflow_id') IS NOT NULL THEN JSON_VALUE(meta, '$.name') END
) VIRTUAL;
CREATE INDEX conveyor_workflow_waiting_index ON {prefix}.oban_jobs (conveyor_workflow_id, state);
