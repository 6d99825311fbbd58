SELECT name, max(tick) FROM conveyor_cron_ticks
WHERE name IN (SELECT value FROM json_each(:names))
GROUP BY name;
