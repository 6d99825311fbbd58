-- Serialise the claims of one queue across the fleet until the transaction ends (queues with
-- fleet-wide limits only). Two queues whose names hash alike merely share a lock.
SELECT pg_advisory_xact_lock(hashtextextended({prefix_literal} || '.queue.' || %(queue)s, 0));
