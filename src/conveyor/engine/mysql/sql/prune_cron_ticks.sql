-- Forget cron ticks older than %(cutoff)s, but each entry's latest (the next tick is reckoned from
-- it). MySQL cannot read the table a DELETE changes in its subquery: the latest ticks are read
-- through a derived table, which it materialises first.
DELETE FROM {prefix}.conveyor_cron_ticks
WHERE tick < %(cutoff)s
  AND (name, tick) NOT IN (
    SELECT name, latest FROM (
        SELECT name, MAX(tick) AS latest FROM {prefix}.conveyor_cron_ticks GROUP BY name
    ) AS l
  );
