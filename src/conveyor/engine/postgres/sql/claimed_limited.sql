SELECT u.*, coalesce(
    r.running + n.claimed >= %(global_limit)s::int OR r.started + n.claimed >= %(rate_allowed)s::int, false
) AS capped
FROM room AS r
CROSS JOIN (SELECT count(*) AS claimed FROM updated) AS n
LEFT JOIN updated AS u ON true
ORDER BY u.priority, u.scheduled_at, u.id
