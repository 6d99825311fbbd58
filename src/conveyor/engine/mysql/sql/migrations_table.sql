-- Conveyor records its own migrations here, one row per migration applied.
CREATE DATABASE IF NOT EXISTS {prefix};
CREATE TABLE IF NOT EXISTS {prefix}.conveyor_migrations (
    version INT NOT NULL PRIMARY KEY,
    name VARCHAR(255) NOT NULL,
    applied_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
