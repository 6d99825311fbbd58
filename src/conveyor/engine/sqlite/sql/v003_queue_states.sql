-- Migration 3: queue settings an operator asked to keep across restarts (a pause, a limit). Nodes
-- apply them when they start a queue; signals apply them to running nodes at once.
CREATE TABLE IF NOT EXISTS conveyor_queue_states (
    name TEXT NOT NULL,
    queue TEXT NOT NULL,
    paused INTEGER CHECK (paused IN (0, 1)),
    local_limit INTEGER,
    updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f000', 'now')),
    PRIMARY KEY (name, queue)
);
