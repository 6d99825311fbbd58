-- Claim up to the demand of available jobs of one queue, in priority, scheduled_at, id order.
-- The LIMIT is fetch_demand.sql (the producer's free slots) or, under fleet-wide limits,
-- fetch_demand_limited.sql: also capped by the queue's global limit less its jobs executing on every
-- node, and by its rate limit less the starts in the window, both counted once (fetch_room.sql).
-- The limited form runs after lock_queue.sql in the same transaction, in a statement begun after the
-- lock was taken, so its counts see every claim committed before, and no other claim of the queue
-- runs until this one commits; it also records its starts for the rate limit and forgets old ones
-- (record_starts.sql), and its rows end with a column saying whether a limit stopped it
-- (claimed_limited.sql: one row without a job when nothing was claimed). The plain form has none of
-- these (nothing.sql, claimed_rows.sql).
-- Fragments carry no comments: they are pasted into the middle of a line.
-- A job with an ordered lock (meta.lock_key) is claimed only when no job with its key runs and none
-- enqueued before it waits (lock_free.sql). A claimed job unique only while it waits drops its unique
-- markers (claimed_meta.sql), so going back to waiting later (a rescue, a snooze) never meets a twin.
-- The UPDATE (claim_update.sql, shared with fetch_partitioned.sql) checks the state again, for claims
-- that take rows without locking them first; as text, so that a generic plan never prefers the state
-- index to the primary key.
-- SKIP LOCKED lets every producer of the fleet fetch at once without waiting on each other.
-- attempted_by records [node, producer uuid] so rescue can tell whose jobs are orphaned.
--
-- The engine runs this as a prepared statement with a generic plan (one plan for every demand), so
-- its shape must be right whatever the estimates: the claimed ids reach the UPDATE as an array,
-- which can only be looked up through the primary key. Joined to the CTE instead, a generic plan
-- expects a tenth of the queue to be claimed and hashes the whole table (tens of ms per fetch), and
-- even a custom plan spends most of a millisecond planning the join.
WITH clock AS (
    SELECT coalesce(%(now)s::timestamp, timezone('UTC', now())) AS now
),
stopping AS (
    SELECT {stopping_ids} AS ids
){room},
claimed AS (
    SELECT id
    FROM {prefix}.oban_jobs AS c
    WHERE state = 'available' AND queue = %(queue)s AND attempt < max_attempts
      AND {lock_free}
    ORDER BY priority, scheduled_at, id
    LIMIT {demand}
    FOR UPDATE SKIP LOCKED
),
updated AS (
    {claim_update}
){record_starts}
-- The primary key hands the rows back in id order: give them in claim order again.
{claimed_rows};
