SELECT COUNT(*) FROM {prefix}.oban_jobs WHERE {filter};
