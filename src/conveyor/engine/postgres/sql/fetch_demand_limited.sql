(SELECT greatest(0, least(
    %(demand)s::integer, %(global_limit)s::integer - r.running, %(rate_allowed)s::integer - r.started
)) FROM room AS r)
