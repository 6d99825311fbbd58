UPDATE {prefix}.oban_jobs SET priority = priority - 1 WHERE id IN %(ids)s;
