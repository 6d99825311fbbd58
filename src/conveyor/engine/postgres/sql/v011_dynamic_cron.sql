-- Migration 11: cron entries stored in the database (dynamic cron), added, changed, paused and
-- deleted at runtime; the leader reads them at every tick. The table and its columns are Oban Pro
-- DynamicCron's (`oban_crons`: name, expression, worker, opts, paused, lock_version, timestamps), so
-- a database shared with Pro stays readable by both.
CREATE TABLE IF NOT EXISTS {prefix}.oban_crons (
    name text PRIMARY KEY,
    expression text NOT NULL,
    worker text NOT NULL,
    opts jsonb NOT NULL DEFAULT '{}'::jsonb,
    paused boolean NOT NULL DEFAULT false,
    lock_version integer NOT NULL DEFAULT 1,
    inserted_at timestamp without time zone NOT NULL DEFAULT timezone('UTC', now()),
    updated_at timestamp without time zone NOT NULL DEFAULT timezone('UTC', now())
);
