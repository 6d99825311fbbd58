-- Migration 10: a step name is unique within its workflow, kept so by the database (see the
-- PostgreSQL migration of the same number). The index replaces migration 8's plain one over the
-- same expressions and predicate, which the lookups repeat word for word. Names stored twice
-- before this migration make it fail (schema.migrate names them).
CREATE UNIQUE INDEX IF NOT EXISTS conveyor_workflow_step_names_index
ON oban_jobs (
    (CASE WHEN json_valid(meta) THEN meta ->> 'workflow_id' END),
    (CASE WHEN json_valid(meta) THEN meta ->> 'name' END)
)
WHERE (CASE WHEN json_valid(meta) THEN meta ->> 'workflow_id' IS NOT NULL ELSE 0 END);
DROP INDEX IF EXISTS conveyor_workflow_steps_index;
