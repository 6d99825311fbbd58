-- Cancel the jobs cancel_targets.sql locked. Executing jobs are cancelled too: their late ack only
-- applies to executing rows, so it cannot undo this.
UPDATE {prefix}.oban_jobs SET state = 'cancelled', cancelled_at = %(now)s WHERE id IN %(ids)s;
