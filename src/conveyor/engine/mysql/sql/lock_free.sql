-- Whether the candidate job c may run now as far as its ordered lock goes (conveyor_lock_key, v005):
-- it has none, or no job of its key runs and none enqueued before it waits, nor a cancelled run of
-- its key still goes on (listed in its producer's meta.stopping until the producer's beat stops
-- holding it). Composed into the claims' statements.
(c.conveyor_lock_key IS NULL OR (NOT EXISTS (
      SELECT 1 FROM {prefix}.oban_jobs AS o
      WHERE o.conveyor_lock_key = c.conveyor_lock_key AND (o.id < c.id OR o.state = 'executing')
  ) AND NOT EXISTS (
      SELECT 1
      FROM {prefix}.oban_producers AS p,
          JSON_TABLE(p.meta, '$.stopping[*]' COLUMNS (id BIGINT PATH '$' NULL ON ERROR)) AS s,
          {prefix}.oban_jobs AS x
      WHERE x.id = s.id AND JSON_VALUE(x.meta, '$.lock_key') = c.conveyor_lock_key
  )))
