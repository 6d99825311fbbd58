-- Migration 11: cron entries stored in the database (dynamic cron), Oban Pro DynamicCron's layout.
CREATE TABLE IF NOT EXISTS {prefix}.oban_crons (
    name VARCHAR(255) NOT NULL PRIMARY KEY,
    expression VARCHAR(255) NOT NULL,
    worker VARCHAR(255) NOT NULL,
    opts JSON NOT NULL DEFAULT ('{}'),
    paused BOOLEAN NOT NULL DEFAULT FALSE,
    lock_version INT NOT NULL DEFAULT 1,
    inserted_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    updated_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
