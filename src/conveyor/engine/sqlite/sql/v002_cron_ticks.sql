-- Migration 2: one row per cron entry per tick. Its primary key is what makes a cron job be
-- inserted exactly once per tick across every process, whoever leads and however often nodes
-- restart.
CREATE TABLE IF NOT EXISTS conveyor_cron_ticks (
    name TEXT NOT NULL,
    tick TEXT NOT NULL,
    inserted_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f000', 'now')),
    PRIMARY KEY (name, tick)
);
