-- Migration 12: queues declared in the database (dynamic queues), which every node, or the nodes
-- `only` names, starts and stops at runtime. Oban Pro DynamicQueues' `oban_queues`, as on PostgreSQL.
CREATE TABLE IF NOT EXISTS oban_queues (
    name TEXT PRIMARY KEY,
    opts TEXT NOT NULL DEFAULT '{}',
    "only" TEXT NOT NULL DEFAULT '{}',
    lock_version INTEGER NOT NULL DEFAULT 1,
    inserted_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f000', 'now')),
    updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f000', 'now'))
);
