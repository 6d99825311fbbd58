-- Delete jobs their transaction locked first (delete_targets.sql, a prune's batches: prune_by_age.sql,
-- prune_by_count.sql).
-- %(ids)s is a JSON array of their ids, each joined to its row by the primary key, whatever the
-- table's size (ack_targets.sql says why): a DELETE ... WHERE id IN (...) of a small table's rows
-- is read by a full scan, locking every row, whatever index it is told to use.
DELETE {prefix}.oban_jobs
FROM JSON_TABLE(%(ids)s, '$[*]' COLUMNS (id BIGINT UNSIGNED PATH '$')) AS t
    STRAIGHT_JOIN {prefix}.oban_jobs FORCE INDEX (PRIMARY) ON {prefix}.oban_jobs.id = t.id;
