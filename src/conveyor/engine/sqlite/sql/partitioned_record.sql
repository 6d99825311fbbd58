-- After a partitioned claim, in its transaction: record its starts, one row per partition of the rate
-- limit ({rate_key} of each claimed job; :ids is the JSON array of their ids).
INSERT INTO conveyor_queue_starts (queue, partition, started_at, started)
SELECT :queue, {rate_key}, :now, count(*)
FROM oban_jobs
WHERE id IN (SELECT value FROM json_each(:ids))
GROUP BY 2;
