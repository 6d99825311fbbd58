-- Migration 6: rate limits (replaced by migration 7's conveyor_queue_starts).
CREATE TABLE IF NOT EXISTS {prefix}.conveyor_rate_starts (
    queue VARCHAR(255) NOT NULL,
    started_at DATETIME(6) NOT NULL,
    started INT NOT NULL,
    INDEX conveyor_rate_starts_queue_started_at_index (queue, started_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
