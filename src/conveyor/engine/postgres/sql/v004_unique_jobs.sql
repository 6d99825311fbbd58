-- Migration 4: unique jobs (conveyor.unique). A unique job carries meta.uniq_key (what identifies
-- it, hashed, with its period's time bucket) and meta.uniq_states (the states in which it keeps a
-- twin out). The index holds the rows whose current state is one of their own uniq_states, so no two
-- such rows share a key, whoever writes them, and a job that moves to another state (completed,
-- cancelled, ...) or is deleted frees its key without anyone touching its meta. Rows without a key
-- fail the predicate's first test at once. The predicate is unique_predicate.sql, which the unique
-- insert also names as its ON CONFLICT target.
--
-- conveyor_state_label is the state's label as text. PostgreSQL's own cast is only stable (labels can
-- be renamed), which an index may not use; labels of oban_job_state are never renamed, so the
-- function says immutable. Comparing with each label as a literal instead would fail in the very
-- transaction that adds 'suspended' to an older Oban enum. It takes anyenum, not oban_job_state, so
-- it never stands in the way of a tool (Oban's own uninstall) that drops the type.
CREATE OR REPLACE FUNCTION {prefix}.conveyor_state_label(state anyenum)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT state::text $$;

CREATE UNIQUE INDEX IF NOT EXISTS oban_jobs_conveyor_unique_index
ON {prefix}.oban_jobs ((meta ->> 'uniq_key'))
WHERE {unique_predicate};
