(NOT coalesce(c.meta ? 'lock_key', false) OR NOT EXISTS (
    SELECT 1 FROM {prefix}.oban_jobs AS o
    WHERE (o.meta ->> 'lock_key') = (c.meta ->> 'lock_key')
      AND o.meta ? 'lock_key' AND o.state NOT IN ('completed', 'discarded', 'cancelled')
      AND (o.id < c.id OR o.state = 'executing')
) AND NOT EXISTS (
    SELECT 1 FROM {prefix}.oban_jobs AS s
    WHERE s.id = ANY((SELECT ids FROM stopping)::bigint[]) AND (s.meta ->> 'lock_key') = (c.meta ->> 'lock_key')
))
