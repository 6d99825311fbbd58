-- Migration 3: queue settings an operator asked to keep across restarts (a pause, a limit). Nodes
-- apply them when they start a queue; signals apply them to running nodes at once.
CREATE TABLE IF NOT EXISTS {prefix}.conveyor_queue_states (
    name text NOT NULL,
    queue text NOT NULL,
    paused boolean,
    local_limit integer,
    updated_at timestamp without time zone NOT NULL DEFAULT timezone('UTC', now()),
    PRIMARY KEY (name, queue)
);
