-- Migration 7: partitioned rate limits and persisted fleet-wide limits.
-- conveyor_queue_starts replaces conveyor_rate_starts (migration 6) with the partition each start
-- counts against ('' for a limit that is not partitioned). Its rows live about one window, so none
-- are carried over: for one window after the migration a rate limit counts from zero.
-- conveyor_queue_limits keeps the global and rate limits an operator asked to keep across restarts
-- (`scale --persist`), as the scale signal carries them: a key holding null lifts that limit.
DROP TABLE IF EXISTS conveyor_rate_starts;
CREATE TABLE IF NOT EXISTS conveyor_queue_starts (
    queue TEXT NOT NULL,
    partition TEXT NOT NULL DEFAULT '',
    started_at TEXT NOT NULL,
    started INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS conveyor_queue_starts_queue_started_at_index
ON conveyor_queue_starts (queue, started_at);
CREATE TABLE IF NOT EXISTS conveyor_queue_limits (
    name TEXT NOT NULL,
    queue TEXT NOT NULL,
    limits TEXT NOT NULL DEFAULT '{}',
    updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f000', 'now')),
    PRIMARY KEY (name, queue)
);
