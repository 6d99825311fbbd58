-- The jobs that became one final state in each bucket of a window (:buckets, a JSON array of
-- [start, end] times), through that state's partial index on its time (named: without statistics
-- SQLite would rather read every job of the state through the fetch index). The engine fills in
-- the state, its column and index, and joins one of these per final state with UNION ALL.
SELECT '{state}' AS kind, b.key AS bucket, count(*)
FROM json_each(:buckets) AS b
JOIN oban_jobs AS j INDEXED BY {index}
  ON j.state = '{state}' AND j.{column} >= b.value ->> 0 AND j.{column} < b.value ->> 1
WHERE {queues}
GROUP BY b.key
