-- Run now the jobs wake_targets.sql found whose awaited message came while they let go.
UPDATE {prefix}.oban_jobs SET state = 'available', scheduled_at = %(now)s WHERE id IN %(ids)s;
