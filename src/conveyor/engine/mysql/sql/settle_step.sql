-- Let one suspended step go on (locked by waiting_step*.sql): available, scheduled or cancelled, with
-- the meta the engine merged (how its dependencies ended, for a batch callback to read).
UPDATE {prefix}.oban_jobs
SET state = %(state)s,
    cancelled_at = CASE WHEN %(state)s = 'cancelled' THEN %(now)s ELSE cancelled_at END,
    meta = %(meta)s
WHERE id = %(id)s AND state = 'suspended';
