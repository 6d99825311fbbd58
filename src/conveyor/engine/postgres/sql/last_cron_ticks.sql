SELECT name, max(tick) FROM {prefix}.conveyor_cron_ticks WHERE name = ANY(%(names)s::text[]) GROUP BY name;
