(SELECT greatest(0, least(
    %(demand)s::int, %(global_limit)s::int - r.running, %(rate_allowed)s::int - r.started
)) FROM room AS r)
