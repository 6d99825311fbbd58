-- Migration 7: partitioned rate limits (the starts of each claim, by partition; '' when the limit
-- is not partitioned) and the fleet-wide limits an operator asked to keep (`scale --persist`).
DROP TABLE IF EXISTS {prefix}.conveyor_rate_starts;
CREATE TABLE IF NOT EXISTS {prefix}.conveyor_queue_starts (
    queue VARCHAR(255) NOT NULL,
    "partition" VARCHAR(255) NOT NULL DEFAULT '',
    started_at DATETIME(6) NOT NULL,
    started INT NOT NULL,
    INDEX conveyor_queue_starts_queue_started_at_index (queue, started_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
CREATE TABLE IF NOT EXISTS {prefix}.conveyor_queue_limits (
    name VARCHAR(255) NOT NULL,
    queue VARCHAR(255) NOT NULL,
    limits JSON NOT NULL DEFAULT ('{}'),
    updated_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    PRIMARY KEY (name, queue)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
