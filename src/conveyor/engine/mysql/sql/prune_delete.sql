DELETE FROM {prefix}.oban_jobs WHERE id IN %(ids)s;
