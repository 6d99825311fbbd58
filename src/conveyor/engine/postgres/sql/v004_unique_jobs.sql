-- Migration 4: unique jobs (conveyor.unique). A unique job carries meta.uniq_key (what identifies
-- it, hashed, with its period's time bucket) and meta.uniq_states (the states in which it keeps a
-- twin out). The index holds the rows whose current state is one of their own uniq_states, so no two
-- such rows share a key, whoever writes them, and a job that moves to another state (completed,
-- cancelled, ...) or is deleted frees its key without anyone touching its meta. Rows without a key
-- fail the predicate's first test at once. The predicate is unique_predicate.sql, which the unique
-- insert also names as its ON CONFLICT target.
--
-- The state is compared with each label (casting the enum to text is only stable, which an index may
-- not use). 'suspended' is named only as "none of the others": a literal of it would fail in the very
-- transaction that adds it to an older Oban enum. Comparisons cost far less than a function call,
-- and every unique insert pays them.
CREATE UNIQUE INDEX IF NOT EXISTS conveyor_unique_jobs_index
ON {prefix}.oban_jobs ((meta ->> 'uniq_key'))
WHERE {unique_predicate};
