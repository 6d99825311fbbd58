-- Migration 11: cron entries stored in the database (dynamic cron), added, changed, paused and
-- deleted at runtime; the leader reads them at every tick. The layout is Oban Pro DynamicCron's
-- `oban_crons` (opts as JSON text, paused as 0/1), as on PostgreSQL.
CREATE TABLE IF NOT EXISTS oban_crons (
    name TEXT PRIMARY KEY,
    expression TEXT NOT NULL,
    worker TEXT NOT NULL,
    opts TEXT NOT NULL DEFAULT '{}',
    paused INTEGER NOT NULL DEFAULT 0 CHECK (paused IN (0, 1)),
    lock_version INTEGER NOT NULL DEFAULT 1,
    inserted_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f000', 'now')),
    updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f000', 'now'))
);
