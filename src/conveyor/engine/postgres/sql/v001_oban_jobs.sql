-- Migration 1: the Oban job table, its enum, the leader and producer tables, exactly as oban-py 0.7
-- lays them out, so Conveyor, oban-py and Elixir Oban can share one database. Creation is
-- conditional, so on a database oban-py installed nothing changes. On one Elixir Oban installed,
-- only what oban-py would add appears: missing indexes, the 'suspended' label, the producer and
-- leader tables, and the table's autovacuum settings. Elixir's own column types (errors jsonb[],
-- integer attempts, bigserial id, nullable tags and meta) are kept: the engine adapts to them.

CREATE SCHEMA IF NOT EXISTS {prefix};

DO $$
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
        WHERE t.typname = 'oban_job_state' AND n.nspname = {prefix_literal}
    ) THEN
        CREATE TYPE {prefix}.oban_job_state AS ENUM (
            'available', 'scheduled', 'suspended', 'executing',
            'retryable', 'completed', 'discarded', 'cancelled'
        );
    END IF;
END
$$;

-- A schema from an older Oban may lack 'suspended'. Its position does not matter: nothing here
-- compares states by enum order.
DO $$
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM pg_enum e
        JOIN pg_type t ON t.oid = e.enumtypid
        JOIN pg_namespace n ON n.oid = t.typnamespace
        WHERE t.typname = 'oban_job_state' AND n.nspname = {prefix_literal}
          AND e.enumlabel = 'suspended'
    ) THEN
        ALTER TYPE {prefix}.oban_job_state ADD VALUE 'suspended' AFTER 'scheduled';
    END IF;
END
$$;

CREATE TABLE IF NOT EXISTS {prefix}.oban_jobs (
    id bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY,
    state {prefix}.oban_job_state NOT NULL DEFAULT 'available',
    queue text NOT NULL DEFAULT 'default',
    worker text NOT NULL,
    attempt smallint NOT NULL DEFAULT 0,
    max_attempts smallint NOT NULL DEFAULT 20,
    priority smallint NOT NULL DEFAULT 0,
    args jsonb NOT NULL DEFAULT '{}',
    meta jsonb NOT NULL DEFAULT '{}',
    tags text[] NOT NULL DEFAULT ARRAY[]::text[],
    errors jsonb NOT NULL DEFAULT '[]',
    attempted_by text[] NOT NULL DEFAULT ARRAY[]::text[],
    inserted_at timestamp without time zone NOT NULL DEFAULT timezone('UTC', now()),
    scheduled_at timestamp without time zone NOT NULL DEFAULT timezone('UTC', now()),
    attempted_at timestamp without time zone,
    cancelled_at timestamp without time zone,
    completed_at timestamp without time zone,
    discarded_at timestamp without time zone,
    CONSTRAINT attempt_range CHECK (attempt >= 0 AND attempt <= max_attempts),
    CONSTRAINT queue_length CHECK (char_length(queue) > 0),
    CONSTRAINT worker_length CHECK (char_length(worker) > 0),
    CONSTRAINT positive_max_attempts CHECK (max_attempts > 0),
    CONSTRAINT non_negative_priority CHECK (priority >= 0)
);

-- A table that an Elixir Oban older than its migration V9 created lacks columns Conveyor reads and
-- writes; a hand-made one may store errors in another type. Stop here with a clear message instead
-- of failing on the first fetch or ack.
DO $$
DECLARE
    missing text;
    errors_type text;
BEGIN
    SELECT string_agg(needed, ', ' ORDER BY needed) INTO missing
    FROM unnest(ARRAY[
        'id', 'state', 'queue', 'worker', 'attempt', 'max_attempts', 'priority', 'args', 'meta',
        'tags', 'errors', 'attempted_by', 'inserted_at', 'scheduled_at', 'attempted_at',
        'cancelled_at', 'completed_at', 'discarded_at'
    ]) AS needed
    WHERE NOT EXISTS (
        SELECT 1 FROM pg_attribute AS a
        WHERE a.attrelid = format('%I.oban_jobs', {prefix_literal})::regclass
          AND a.attname = needed AND a.attnum > 0 AND NOT a.attisdropped
    );
    IF missing IS NOT NULL THEN
        RAISE EXCEPTION '%.oban_jobs lacks the columns %', {prefix_literal}, missing
            USING HINT = 'On a table Elixir Oban created, run its migrations to version 9 or '
                         'later (Oban.Migrations.up/1) first.';
    END IF;
    SELECT format_type(a.atttypid, a.atttypmod) INTO errors_type
    FROM pg_attribute AS a
    WHERE a.attrelid = format('%I.oban_jobs', {prefix_literal})::regclass AND a.attname = 'errors';
    IF errors_type NOT IN ('jsonb', 'jsonb[]') THEN
        RAISE EXCEPTION '%.oban_jobs.errors is %, Conveyor reads jsonb (oban-py) or jsonb[] (Elixir Oban)',
            {prefix_literal}, errors_type;
    END IF;
END
$$;

CREATE UNLOGGED TABLE IF NOT EXISTS {prefix}.oban_leaders (
    name text PRIMARY KEY DEFAULT 'oban',
    node text NOT NULL,
    elected_at timestamp without time zone NOT NULL,
    expires_at timestamp without time zone NOT NULL
);

CREATE UNLOGGED TABLE IF NOT EXISTS {prefix}.oban_producers (
    uuid uuid PRIMARY KEY,
    name text NOT NULL DEFAULT 'oban',
    node text NOT NULL,
    queue text NOT NULL,
    meta jsonb NOT NULL DEFAULT '{}',
    started_at timestamp without time zone NOT NULL DEFAULT timezone('UTC', now()),
    updated_at timestamp without time zone NOT NULL DEFAULT timezone('UTC', now())
);

-- The fetch index: producers read available jobs of one queue in priority, time, id order.
CREATE INDEX IF NOT EXISTS oban_jobs_state_queue_priority_scheduled_at_id_index
    ON {prefix}.oban_jobs (state, queue, priority, scheduled_at, id) WITH (fillfactor = 90);

-- The stager reads due scheduled and retryable jobs. Elixir Oban's migration V15 creates the same
-- index as oban_jobs_staging_idx: where that exists, a second one would only slow every write. The
-- schema's object list names it as this one's stand-in (schema.OBJECTS), so install_sql wraps this
-- statement in a check and the runner of an upgrade skips it.
CREATE INDEX IF NOT EXISTS oban_jobs_staging_index
    ON {prefix}.oban_jobs (scheduled_at, id) INCLUDE (queue)
    WHERE state IN ('scheduled', 'retryable');

-- The pruner deletes old final jobs by the time they became final.
CREATE INDEX IF NOT EXISTS oban_jobs_completed_at_index
    ON {prefix}.oban_jobs (completed_at) WHERE state = 'completed';
CREATE INDEX IF NOT EXISTS oban_jobs_cancelled_at_index
    ON {prefix}.oban_jobs (cancelled_at) WHERE state = 'cancelled';
CREATE INDEX IF NOT EXISTS oban_jobs_discarded_at_index
    ON {prefix}.oban_jobs (discarded_at) WHERE state = 'discarded';

-- A queue table churns constantly: vacuum and analyze early, leave room for HOT updates.
ALTER TABLE {prefix}.oban_jobs SET (
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_threshold = 50,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_analyze_threshold = 100,
    autovacuum_vacuum_cost_limit = 2000,
    autovacuum_vacuum_cost_delay = 1,
    autovacuum_vacuum_insert_scale_factor = 0.02,
    autovacuum_vacuum_insert_threshold = 1000,
    fillfactor = 85
);

-- Counting a big state exactly is slow; the planner's estimate is instant and close enough.
-- Created only when missing, so an Oban-installed function is left exactly as it was.
DO $outer$
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE p.proname = 'oban_count_estimate' AND n.nspname = {prefix_literal}
    ) THEN
        CREATE FUNCTION {prefix}.oban_count_estimate(state text, queue text)
        RETURNS integer AS $func$
        DECLARE
            plan jsonb;
        BEGIN
            EXECUTE format(
                'EXPLAIN (FORMAT JSON) SELECT id FROM %I.oban_jobs '
                'WHERE state = $1::%I.oban_job_state AND queue = $2',
                {prefix_literal}, {prefix_literal}
            ) INTO plan USING state, queue;
            RETURN plan->0->'Plan'->'Plan Rows';
        END;
        $func$ LANGUAGE plpgsql;
    END IF;
END
$outer$;
