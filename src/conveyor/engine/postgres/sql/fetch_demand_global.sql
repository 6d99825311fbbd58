greatest(0, least(%(demand)s, %(global_limit)s - (
    SELECT count(*) FROM {prefix}.oban_jobs WHERE state = 'executing' AND queue = %(queue)s
)))
