-- Migration 1: the Oban job table with PostgreSQL's column names and meanings, the leader and
-- producer tables, and the table cross-process notifications travel through.
--
-- SQLite has no enum, array, jsonb or timestamp types, so:
--   * state is TEXT, limited by a CHECK to the eight oban_job_state labels;
--   * args, meta and errors are JSON text; tags and attempted_by are JSON arrays of strings;
--   * times are naive UTC text 'YYYY-MM-DD HH:MM:SS.ffffff' (always six fractional digits), which
--     sorts and compares correctly as text.
-- AUTOINCREMENT keeps ids from ever being reused, as PostgreSQL's identity column does.

CREATE TABLE IF NOT EXISTS oban_jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    state TEXT NOT NULL DEFAULT 'available',
    queue TEXT NOT NULL DEFAULT 'default',
    worker TEXT NOT NULL,
    attempt INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL DEFAULT 20,
    priority INTEGER NOT NULL DEFAULT 0,
    args TEXT NOT NULL DEFAULT '{}',
    meta TEXT NOT NULL DEFAULT '{}',
    tags TEXT NOT NULL DEFAULT '[]',
    errors TEXT NOT NULL DEFAULT '[]',
    attempted_by TEXT NOT NULL DEFAULT '[]',
    inserted_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f000', 'now')),
    scheduled_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f000', 'now')),
    attempted_at TEXT,
    cancelled_at TEXT,
    completed_at TEXT,
    discarded_at TEXT,
    CONSTRAINT state_value CHECK (
        state IN (
            'available', 'scheduled', 'suspended', 'executing',
            'retryable', 'completed', 'discarded', 'cancelled'
        )
    ),
    CONSTRAINT attempt_range CHECK (attempt >= 0 AND attempt <= max_attempts),
    CONSTRAINT queue_length CHECK (length(queue) > 0),
    CONSTRAINT worker_length CHECK (length(worker) > 0),
    CONSTRAINT positive_max_attempts CHECK (max_attempts > 0),
    CONSTRAINT non_negative_priority CHECK (priority >= 0)
);

CREATE TABLE IF NOT EXISTS oban_leaders (
    name TEXT PRIMARY KEY DEFAULT 'oban',
    node TEXT NOT NULL,
    elected_at TEXT NOT NULL,
    expires_at TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS oban_producers (
    uuid TEXT PRIMARY KEY,
    name TEXT NOT NULL DEFAULT 'oban',
    node TEXT NOT NULL,
    queue TEXT NOT NULL,
    meta TEXT NOT NULL DEFAULT '{}',
    started_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f000', 'now')),
    updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f000', 'now'))
);

-- The fetch index: producers read available jobs of one queue in priority, time, id order.
CREATE INDEX IF NOT EXISTS oban_jobs_state_queue_priority_scheduled_at_id_index
    ON oban_jobs (state, queue, priority, scheduled_at, id);

-- The stager reads due scheduled and retryable jobs.
CREATE INDEX IF NOT EXISTS oban_jobs_staging_index
    ON oban_jobs (scheduled_at, id)
    WHERE state IN ('scheduled', 'retryable');

-- The pruner deletes old final jobs by the time they became final.
CREATE INDEX IF NOT EXISTS oban_jobs_completed_at_index
    ON oban_jobs (completed_at) WHERE state = 'completed';
CREATE INDEX IF NOT EXISTS oban_jobs_cancelled_at_index
    ON oban_jobs (cancelled_at) WHERE state = 'cancelled';
CREATE INDEX IF NOT EXISTS oban_jobs_discarded_at_index
    ON oban_jobs (discarded_at) WHERE state = 'discarded';

-- Notifications between processes (SQLite has no LISTEN/NOTIFY): notify inserts a row, each
-- process's listener reads the rows that appeared since it last looked. source names the process
-- that already delivered the row to its own listeners (NULL: nobody did, e.g. a caller's
-- transaction). Rows are deleted once they are old.
CREATE TABLE IF NOT EXISTS conveyor_notifications (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    channel TEXT NOT NULL,
    payload TEXT NOT NULL,
    source TEXT,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f000', 'now'))
);
