-- The jobs of an insert, many rows per statement (the engine puts one group of placeholders per job in the VALUES list). With
-- innodb_autoinc_lock_mode 0 or 1 a multi-row INSERT takes consecutive ids, in row order, from
-- LAST_INSERT_ID() on (the engine checks the mode at open, and writes one row a statement under 2).
INSERT INTO {prefix}.oban_jobs (
    state, queue, worker, args, meta, tags, priority, max_attempts, scheduled_at, inserted_at
) VALUES {values};
