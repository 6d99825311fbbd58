-- Claim one cron tick: only the first claim of (name, tick) returns a row, and only a claimed tick
-- inserts its job (cron_job.sql), so each tick runs once across every process.
INSERT INTO conveyor_cron_ticks (name, tick, inserted_at)
VALUES (:name, :tick, :now)
ON CONFLICT (name, tick) DO NOTHING
RETURNING name;
