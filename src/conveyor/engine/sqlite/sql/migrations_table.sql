-- Conveyor records its own migrations here, one row per migration applied.
CREATE TABLE IF NOT EXISTS conveyor_migrations (
    version INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f000', 'now'))
);
