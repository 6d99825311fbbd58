-- Jobs executing for these producers, claimed more than %(older_than)s seconds ago. A producer that
-- does not run one of them lost the reply of the fetch that claimed it, and gives it back.
SELECT id, attempt
FROM {prefix}.oban_jobs
WHERE state = 'executing'
  AND attempted_by[2] = ANY(%(producers)s::text[])
  AND attempted_at < coalesce(%(now)s::timestamp, timezone('UTC', now())) - make_interval(secs => %(older_than)s);
