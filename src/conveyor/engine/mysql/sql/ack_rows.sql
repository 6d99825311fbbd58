-- The rest of an ack batch (engine/mysql/ack_writes.py), in one statement: the rows ack_targets.sql
-- read executing this attempt, locked, each joined by id to its ack among %(acks)s, a JSON array of
-- [id, state, scheduled_at or null, attempt given back (a snooze: 1), errors or null, meta or null]
-- (errors and meta as JSON text the engine merged; null: unchanged). Each row is read by the primary
-- key, the batch first (ack_targets.sql, delete_jobs.sql).
UPDATE JSON_TABLE(%(acks)s, '$[*]' COLUMNS (
        id BIGINT UNSIGNED PATH '$[0]',
        state VARCHAR(16) PATH '$[1]',
        scheduled_at DATETIME(6) PATH '$[2]',
        back INT PATH '$[3]',
        errors LONGTEXT PATH '$[4]',
        meta LONGTEXT PATH '$[5]'
    )) AS a
    STRAIGHT_JOIN {prefix}.oban_jobs AS j FORCE INDEX (PRIMARY) ON j.id = a.id
SET j.state = a.state,
    j.completed_at = CASE WHEN a.state = 'completed' THEN %(now)s ELSE j.completed_at END,
    j.discarded_at = CASE WHEN a.state = 'discarded' THEN %(now)s ELSE j.discarded_at END,
    j.cancelled_at = CASE WHEN a.state = 'cancelled' THEN %(now)s ELSE j.cancelled_at END,
    j.scheduled_at = COALESCE(a.scheduled_at, j.scheduled_at),
    j.attempt = j.attempt - a.back,
    j.errors = COALESCE(a.errors, j.errors),
    j.meta = COALESCE(a.meta, j.meta);
