-- Cancel the jobs cancel_targets.sql chose, in the same transaction. Executing jobs are cancelled
-- too: their late ack only applies to executing rows, so it cannot undo this. (The engine then lists
-- them in their producers' rows: stop_listed.sql.)
UPDATE oban_jobs
SET state = 'cancelled', cancelled_at = :now
WHERE id IN (SELECT value FROM json_each(:ids))
RETURNING id;
