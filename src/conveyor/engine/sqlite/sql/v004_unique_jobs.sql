-- Migration 4: unique jobs (conveyor.unique). A unique job carries meta.uniq_key (what identifies
-- it, hashed, with its period's time bucket) and meta.uniq_states (the states in which it keeps a
-- twin out). The index holds the rows whose current state is one of their own uniq_states, so no two
-- such rows share a key, and a job that moves to another state or is deleted frees its key. meta is
-- read only when it is valid JSON: another client's junk must never make a write of its row fail.
-- The expression and the predicate are unique_key.sql and unique_predicate.sql, which the lookups
-- repeat word for word (SQLite uses an expression index only for the same expression).
CREATE UNIQUE INDEX IF NOT EXISTS conveyor_unique_jobs_index
ON oban_jobs ((CASE WHEN json_valid(meta) THEN meta ->> 'uniq_key' END))
WHERE {unique_predicate};
