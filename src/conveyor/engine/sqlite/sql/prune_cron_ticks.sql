-- Old ticks are only needed to know an entry's latest tick (for back-filling): keep that one.
DELETE FROM conveyor_cron_ticks
WHERE tick < :cutoff
  AND tick < (SELECT max(l.tick) FROM conveyor_cron_ticks AS l WHERE l.name = conveyor_cron_ticks.name);
