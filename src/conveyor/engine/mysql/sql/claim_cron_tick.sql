-- Claim one tick of one cron entry: its primary key (name, tick) lets one process in the whole
-- fleet insert it; a row there already (affected rows 0) means the tick was handled.
INSERT INTO {prefix}.conveyor_cron_ticks (name, tick, inserted_at)
VALUES (%(name)s, %(tick)s, %(now)s)
ON DUPLICATE KEY UPDATE name = name;
