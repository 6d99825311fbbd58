-- Migration 6: rate limits (QueueSettings.rate_limit). Each claim of a rate-limited queue records how
-- many jobs it started and when; a claim may start no more than the limit less the starts recorded in
-- the window before it (fetch_demand_limited.sql). Rows older than the window are deleted by the next
-- claim of the queue.
CREATE TABLE IF NOT EXISTS conveyor_rate_starts (
    queue TEXT NOT NULL,
    started_at TEXT NOT NULL,
    started INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS conveyor_rate_starts_queue_started_at_index
ON conveyor_rate_starts (queue, started_at);
