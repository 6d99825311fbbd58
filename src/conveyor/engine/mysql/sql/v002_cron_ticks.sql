-- Migration 2: one row per cron entry per tick; its primary key makes a cron job be inserted once
-- per tick across every process.
CREATE TABLE IF NOT EXISTS {prefix}.conveyor_cron_ticks (
    name VARCHAR(255) NOT NULL,
    tick DATETIME(6) NOT NULL,
    inserted_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    PRIMARY KEY (name, tick)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
