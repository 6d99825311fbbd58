-- Migration 2: one row per cron entry per tick. Its primary key is what makes a cron job be
-- inserted exactly once per tick across the whole fleet, whoever leads and however often nodes
-- restart.
CREATE TABLE IF NOT EXISTS {prefix}.conveyor_cron_ticks (
    name text NOT NULL,
    tick timestamp without time zone NOT NULL,
    inserted_at timestamp without time zone NOT NULL DEFAULT timezone('UTC', now()),
    PRIMARY KEY (name, tick)
);
