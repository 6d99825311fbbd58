-- Run now the jobs wake_targets.sql found whose awaited message came while they let go.
-- By the primary key only, whatever the table's size (ack_targets.sql says why).
UPDATE {prefix}.oban_jobs FORCE INDEX (PRIMARY) SET state = 'available', scheduled_at = %(now)s WHERE id IN %(ids)s;
