-- Migration 12: queues declared in the database (dynamic queues), Oban Pro DynamicQueues' layout.
CREATE TABLE IF NOT EXISTS {prefix}.oban_queues (
    name VARCHAR(255) NOT NULL PRIMARY KEY,
    opts JSON NOT NULL DEFAULT ('{}'),
    "only" JSON NOT NULL DEFAULT ('{}'),
    lock_version INT NOT NULL DEFAULT 1,
    inserted_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    updated_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
