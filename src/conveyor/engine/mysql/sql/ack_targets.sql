-- The rows some acks name that are executing, locked until the acks are written: the engine keeps
-- those whose attempt (and claiming node) match, and merges errors and meta in Python. Read by the
-- primary key whatever the table's size: on a small table the optimizer prefers a full scan, which
-- under REPEATABLE READ locks every row it reads (available jobs too, which claims then skip).
SELECT id, attempt, attempted_by, errors, meta FROM {prefix}.oban_jobs FORCE INDEX (PRIMARY)
WHERE id IN %(ids)s AND state = 'executing'
FOR UPDATE;
