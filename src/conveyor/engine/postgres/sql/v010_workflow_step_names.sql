-- Migration 10: a step name is unique within its workflow, kept so by the database. Of two enqueues
-- adding the same name to one workflow at once (two running steps grafting alike), the second
-- waits for the first and is refused whole, instead of storing the name twice: a settle looks a
-- dependency up by (workflow, name) and must find one row. The index replaces migration 8's plain
-- one over the same expressions (the lookups use it the same way). It covers only rows whose meta
-- names a workflow, as Oban Pro's steps also do, with names unique within a workflow there too;
-- a row without a name (NULL) never conflicts. Names stored twice before this migration stop it,
-- naming them: the migration cannot choose which of the two steps to keep.
DO $$
DECLARE
    twice record;
BEGIN
    SELECT meta ->> 'workflow_id' AS workflow, meta ->> 'name' AS name, count(*) AS rows INTO twice
    FROM {prefix}.oban_jobs
    WHERE meta ? 'workflow_id' AND meta ->> 'name' IS NOT NULL
    GROUP BY 1, 2 HAVING count(*) > 1
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'workflow % has % steps named %: a name must be unique within its workflow',
            quote_literal(twice.workflow), twice.rows, quote_literal(twice.name)
            USING HINT = 'Delete or rename (meta.name) all but one of each such step, then migrate again.';
    END IF;
END
$$;
CREATE UNIQUE INDEX IF NOT EXISTS conveyor_workflow_step_names_index
ON {prefix}.oban_jobs ((meta ->> 'workflow_id'), (meta ->> 'name'))
WHERE meta ? 'workflow_id';
DROP INDEX IF EXISTS {prefix}.conveyor_workflow_steps_index;
