-- Claim up to the demand of available jobs of one queue, in priority, scheduled_at, id order. It runs in
-- a BEGIN IMMEDIATE transaction: SQLite has one writer at a time, so no two processes ever claim the
-- same job, and a count inside it sees every other claim. The LIMIT is fetch_demand.sql, or
-- fetch_demand_global.sql under a global limit. attempted_by records [node, producer uuid] so
-- rescue can tell whose jobs are orphaned.
UPDATE oban_jobs
SET state = 'executing',
    attempt = attempt + 1,
    attempted_at = :now,
    attempted_by = json_array(:node, :producer)
WHERE id IN (
    SELECT id FROM oban_jobs
    WHERE state = 'available' AND queue = :queue AND attempt < max_attempts
    ORDER BY priority, scheduled_at, id
    LIMIT {demand}
)
RETURNING {columns};
