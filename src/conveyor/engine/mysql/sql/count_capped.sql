-- The jobs matching a filter, counted no further than the cap and for a bounded time: on MySQL by
-- the hint, on MariaDB by the SET STATEMENT clause of time_limit_mariadb.sql put in front. Either
-- refuses with an error once the time is up.
{time_limit} SELECT /*+ MAX_EXECUTION_TIME({milliseconds}) */ COUNT(*) FROM (
  SELECT 1 FROM {prefix}.oban_jobs WHERE {filter} LIMIT %(cap)s
) AS capped;
