-- Claim up to the demand of available jobs of one queue, in priority, scheduled_at, id order. It runs in
-- a BEGIN IMMEDIATE transaction: SQLite has one writer at a time, so no two processes ever claim the
-- same job, and a count inside it sees every other claim. The LIMIT is fetch_demand.sql, or
-- fetch_demand_limited.sql under a global or rate limit. attempted_by records [node, producer uuid] so
-- rescue can tell whose jobs are orphaned.
-- A job with an ordered lock (meta.lock_key) is claimed only when no job with its key runs and none
-- enqueued before it waits (lock_free.sql). A claimed job unique only while it waits drops its unique
-- markers (claimed_meta.sql), so going back to waiting later (a rescue, a snooze) never meets a twin.
WITH claimed AS (
    SELECT id FROM oban_jobs AS c
    WHERE state = 'available' AND queue = :queue AND attempt < max_attempts
      AND {lock_free}
    ORDER BY priority, scheduled_at, id
    LIMIT {demand}
)
{claim_update};
