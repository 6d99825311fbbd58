-- Cancel the jobs cancel_targets.sql locked. Executing jobs are cancelled too: their late ack only
-- applies to executing rows, so it cannot undo this.
-- By the primary key only, whatever the table's size (ack_targets.sql says why).
UPDATE {prefix}.oban_jobs FORCE INDEX (PRIMARY) SET state = 'cancelled', cancelled_at = %(now)s WHERE id IN %(ids)s;
