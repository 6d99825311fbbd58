UPDATE {prefix}.oban_jobs SET state = 'available' WHERE id IN %(ids)s;
