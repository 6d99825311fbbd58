-- Migration 7: partitioned rate limits and persisted fleet-wide limits.
-- conveyor_queue_starts replaces conveyor_rate_starts (migration 6) with the partition each start
-- counts against ('' for a limit that is not partitioned). Its rows live about one window, so none
-- are carried over: for one window after the migration a rate limit counts from zero.
-- conveyor_queue_limits keeps the global and rate limits an operator asked to keep across restarts
-- (`scale --persist`), as the scale signal carries them: a key holding null lifts that limit.
DROP TABLE IF EXISTS {prefix}.conveyor_rate_starts;
CREATE TABLE IF NOT EXISTS {prefix}.conveyor_queue_starts (
    queue text NOT NULL,
    partition text NOT NULL DEFAULT '',
    started_at timestamp without time zone NOT NULL,
    started integer NOT NULL
);
CREATE INDEX IF NOT EXISTS conveyor_queue_starts_queue_started_at_index
ON {prefix}.conveyor_queue_starts (queue, started_at);
CREATE TABLE IF NOT EXISTS {prefix}.conveyor_queue_limits (
    name text NOT NULL,
    queue text NOT NULL,
    limits jsonb NOT NULL DEFAULT '{}',
    updated_at timestamp without time zone NOT NULL DEFAULT timezone('UTC', now()),
    PRIMARY KEY (name, queue)
);
