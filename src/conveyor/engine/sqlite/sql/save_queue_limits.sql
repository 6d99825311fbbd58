-- Remember fleet-wide limits of a queue (`scale --persist`), as the scale signal carries them; the
-- engine merges the keys given into the ones kept (null lifts a limit) in the same transaction.
INSERT INTO conveyor_queue_limits AS s (name, queue, limits, updated_at)
VALUES (:name, :queue, :limits, :now)
ON CONFLICT (name, queue) DO UPDATE
SET limits = excluded.limits, updated_at = excluded.updated_at;
