-- Claim the jobs fetch_jobs.sql locked: attempted_by records [node, producer uuid] so rescue can
-- tell whose jobs are orphaned. A job unique only while it waits drops its unique markers, so going
-- back to waiting later (a rescue, a snooze) never meets a twin.
-- By the primary key only, whatever the table's size (ack_targets.sql says why).
UPDATE {prefix}.oban_jobs FORCE INDEX (PRIMARY)
SET state = 'executing',
    attempt = attempt + 1,
    attempted_at = %(now)s,
    attempted_by = JSON_ARRAY(%(node)s, %(producer)s),
    meta = CASE
        WHEN JSON_VALUE(meta, '$.uniq_key') IS NOT NULL
            AND NOT COALESCE(JSON_CONTAINS(JSON_EXTRACT(meta, '$.uniq_states'), '"executing"'), FALSE)
        THEN JSON_REMOVE(meta, '$.uniq_key', '$.uniq_states')
        ELSE meta
    END
WHERE id IN %(ids)s;
