-- Migration 13: a row per workflow that needs one: its lock while it is unfinished (NULL locks never
-- conflict), and the compact record of how it ended once its steps are pruned.
CREATE TABLE IF NOT EXISTS {prefix}.conveyor_workflows (
    id VARCHAR(255) NOT NULL PRIMARY KEY,
    name VARCHAR(255),
    "lock" VARCHAR(255),
    state VARCHAR(32),
    failed_step VARCHAR(255),
    counts JSON,
    inserted_at DATETIME(6) NOT NULL,
    finished_at DATETIME(6),
    UNIQUE INDEX conveyor_workflow_locks_index ("lock"),
    INDEX conveyor_workflow_records_index (finished_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
