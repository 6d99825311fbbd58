-- Write back a meta the engine merged (a step's dependents grown).
UPDATE {prefix}.oban_jobs SET meta = %(meta)s WHERE id = %(id)s;
