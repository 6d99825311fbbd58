-- Conveyor records its own migrations here. It never touches the COMMENT ON TABLE oban_jobs that
-- Elixir Oban uses for its version.
CREATE SCHEMA IF NOT EXISTS {prefix};

CREATE TABLE IF NOT EXISTS {prefix}.conveyor_migrations (
    version integer PRIMARY KEY,
    name text NOT NULL,
    applied_at timestamp without time zone NOT NULL DEFAULT timezone('UTC', now())
);
