-- One suspended step by id, locked until it is settled.
SELECT id, meta, queue, scheduled_at FROM {prefix}.oban_jobs
WHERE id = %(id)s AND state = 'suspended'
FOR UPDATE;
