-- Migration 1: the Oban job table as Oban's MySQL engine (Dolphin, Oban.Migrations.MyXQL) lays it
-- out: the same table, column names and types (an ENUM state, JSON args/meta/tags/errors/
-- attempted_by, naive UTC DATETIME(6) times), constraints and fetch index, and its peer table
-- oban_peers for the leader's lease. Then what Conveyor needs beside it: the producer table
-- (oban-py's layout) and the table notifications travel through (MySQL has no LISTEN/NOTIFY).
-- {prefix} is the database (MySQL's databases play the part of PostgreSQL's schemas).
CREATE DATABASE IF NOT EXISTS {prefix};

CREATE TABLE IF NOT EXISTS {prefix}.oban_jobs (
    id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
    state ENUM('suspended', 'available', 'scheduled', 'executing', 'retryable', 'completed',
               'cancelled', 'discarded') NOT NULL DEFAULT 'available',
    queue VARCHAR(255) NOT NULL DEFAULT 'default',
    worker VARCHAR(255) NOT NULL,
    args JSON NOT NULL DEFAULT ('{}'),
    meta JSON NOT NULL DEFAULT ('{}'),
    tags JSON NOT NULL DEFAULT ('[]'),
    attempted_by JSON NOT NULL DEFAULT ('[]'),
    errors JSON NOT NULL DEFAULT ('[]'),
    attempt INT NOT NULL DEFAULT 0,
    max_attempts INT NOT NULL DEFAULT 20,
    priority INT NOT NULL DEFAULT 0,
    inserted_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    scheduled_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    attempted_at DATETIME(6),
    cancelled_at DATETIME(6),
    completed_at DATETIME(6),
    discarded_at DATETIME(6),
    CONSTRAINT attempt_range CHECK (attempt BETWEEN 0 AND max_attempts),
    CONSTRAINT non_negative_priority CHECK (priority >= 0),
    CONSTRAINT positive_max_attempts CHECK (max_attempts > 0),
    CONSTRAINT queue_length CHECK (char_length(queue) > 0 AND char_length(queue) < 128),
    CONSTRAINT worker_length CHECK (char_length(worker) > 0 AND char_length(worker) < 128),
    INDEX oban_jobs_state_queue_priority_scheduled_at_id_index (state, queue, priority, scheduled_at, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS {prefix}.oban_peers (
    name VARCHAR(255) NOT NULL PRIMARY KEY,
    node VARCHAR(255) NOT NULL,
    started_at DATETIME(6) NOT NULL,
    expires_at DATETIME(6) NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- MySQL has no partial indexes: the stager and the pruner read through plain ones.
CREATE INDEX oban_jobs_staging_index ON {prefix}.oban_jobs (state, scheduled_at, id);
CREATE INDEX oban_jobs_completed_at_index ON {prefix}.oban_jobs (state, completed_at);
CREATE INDEX oban_jobs_cancelled_at_index ON {prefix}.oban_jobs (state, cancelled_at);
CREATE INDEX oban_jobs_discarded_at_index ON {prefix}.oban_jobs (state, discarded_at);

CREATE TABLE IF NOT EXISTS {prefix}.oban_producers (
    uuid CHAR(36) NOT NULL PRIMARY KEY,
    name VARCHAR(255) NOT NULL DEFAULT 'oban',
    node VARCHAR(255) NOT NULL,
    queue VARCHAR(255) NOT NULL,
    meta JSON NOT NULL DEFAULT ('{}'),
    started_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    updated_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Notifications between processes: notify inserts a row in the sender's transaction (a rollback
-- sends nothing); each engine's listener reads the rows that appeared since it last looked.
-- Rows are deleted once they are old.
CREATE TABLE IF NOT EXISTS {prefix}.conveyor_notifications (
    id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
    channel VARCHAR(64) NOT NULL,
    payload MEDIUMTEXT NOT NULL,
    created_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
