SELECT name, MAX(tick) FROM {prefix}.conveyor_cron_ticks WHERE name IN %(names)s GROUP BY name;
