CASE WHEN (CASE WHEN json_valid(c.meta) THEN c.meta ->> 'lock_key' END) IS NULL THEN 1 ELSE NOT EXISTS (
    SELECT 1 FROM oban_jobs AS o
    WHERE (CASE WHEN json_valid(o.meta) THEN o.meta ->> 'lock_key' END) = c.meta ->> 'lock_key'
      AND (CASE WHEN json_valid(o.meta) THEN o.meta ->> 'lock_key' IS NOT NULL ELSE 0 END)
      AND o.state NOT IN ('completed', 'discarded', 'cancelled')
      AND (o.id < c.id OR o.state = 'executing')
) AND NOT EXISTS (
    SELECT 1 FROM oban_jobs AS s
    WHERE s.id IN {stopping_ids}
      AND (CASE WHEN json_valid(s.meta) THEN s.meta ->> 'lock_key' END) = c.meta ->> 'lock_key'
) END
