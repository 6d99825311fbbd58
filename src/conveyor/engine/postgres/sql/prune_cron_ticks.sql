-- Old ticks are only needed to know an entry's latest tick (for back-filling): keep that one.
DELETE FROM {prefix}.conveyor_cron_ticks AS t
WHERE t.tick < coalesce(%(now)s::timestamp, timezone('UTC', now())) - make_interval(secs => %(max_age)s)
  AND t.tick < (SELECT max(tick) FROM {prefix}.conveyor_cron_ticks AS l WHERE l.name = t.name);
