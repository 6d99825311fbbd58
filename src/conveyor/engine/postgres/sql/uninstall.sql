DROP TABLE IF EXISTS {prefix}.conveyor_rate_starts;
DROP TABLE IF EXISTS {prefix}.conveyor_queue_states;
DROP TABLE IF EXISTS {prefix}.conveyor_cron_ticks;
DROP TABLE IF EXISTS {prefix}.conveyor_migrations;
DROP TABLE IF EXISTS {prefix}.oban_producers;
DROP TABLE IF EXISTS {prefix}.oban_leaders;
DROP TABLE IF EXISTS {prefix}.oban_jobs;
DROP FUNCTION IF EXISTS {prefix}.oban_count_estimate(text, text);
DROP TYPE IF EXISTS {prefix}.oban_job_state;
