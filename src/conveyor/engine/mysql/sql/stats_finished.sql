-- The jobs that became one final state (%(state)s, timed by {column}) in each bucket of a window
-- (%(buckets)s, a JSON array of [start, end] times; a start included, an end excluded), through
-- the index on {column}. The engine fills in the column and the queue condition.
SELECT b.bucket - 1, COUNT(*)
FROM JSON_TABLE(%(buckets)s, '$[*]' COLUMNS (
    bucket FOR ORDINALITY,
    starts DATETIME(6) PATH '$[0]',
    ends DATETIME(6) PATH '$[1]'
)) AS b
JOIN {prefix}.oban_jobs AS j
  ON j.{column} >= b.starts AND j.{column} < b.ends AND j.state = %(state)s
WHERE {queues}
GROUP BY b.bucket;
