-- Migration 4: unique jobs. MySQL has neither partial nor (on MariaDB) expression indexes, so the
-- key is a virtual column of Conveyor's own: meta.uniq_key while the job's state is one of its
-- meta.uniq_states, else NULL; a UNIQUE index over it lets no two such rows share a key (NULLs never
-- conflict), and a job that moves to another state or is deleted frees its key. Oban ignores the
-- column (its queries name theirs).
ALTER TABLE {prefix}.oban_jobs ADD COLUMN conveyor_uniq_key VARCHAR(255) GENERATED ALWAYS AS (
    CASE WHEN JSON_CONTAINS(JSON_EXTRACT(meta, '$.uniq_states'), JSON_QUOTE(state))
    THEN JSON_VALUE(meta, '$.uniq_key') END
) VIRTUAL;
CREATE UNIQUE INDEX conveyor_unique_jobs_index ON {prefix}.oban_jobs (conveyor_uniq_key);
