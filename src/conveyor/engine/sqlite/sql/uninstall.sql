DROP TABLE IF EXISTS conveyor_rate_starts;
DROP TABLE IF EXISTS conveyor_queue_states;
DROP TABLE IF EXISTS conveyor_cron_ticks;
DROP TABLE IF EXISTS conveyor_migrations;
DROP TABLE IF EXISTS conveyor_notifications;
DROP TABLE IF EXISTS oban_producers;
DROP TABLE IF EXISTS oban_leaders;
DROP TABLE IF EXISTS oban_jobs;
