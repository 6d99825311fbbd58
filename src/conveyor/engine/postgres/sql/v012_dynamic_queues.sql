-- Migration 12: queues declared in the database (dynamic queues), which every node, or the nodes
-- `only` names, starts and stops at runtime. The layout is Oban Pro DynamicQueues' `oban_queues`
-- (name, opts, only, lock_version, timestamps), so a database shared with Pro stays readable.
CREATE TABLE IF NOT EXISTS {prefix}.oban_queues (
    name text PRIMARY KEY,
    opts jsonb NOT NULL DEFAULT '{}'::jsonb,
    "only" jsonb NOT NULL DEFAULT '{}'::jsonb,
    lock_version integer NOT NULL DEFAULT 1,
    inserted_at timestamp without time zone NOT NULL DEFAULT timezone('UTC', now()),
    updated_at timestamp without time zone NOT NULL DEFAULT timezone('UTC', now())
);
