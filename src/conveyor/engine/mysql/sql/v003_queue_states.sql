-- Migration 3: queue settings an operator asked to keep across restarts (a pause, a limit).
CREATE TABLE IF NOT EXISTS {prefix}.conveyor_queue_states (
    name VARCHAR(255) NOT NULL,
    queue VARCHAR(255) NOT NULL,
    paused BOOLEAN,
    local_limit INT,
    updated_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    PRIMARY KEY (name, queue)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
