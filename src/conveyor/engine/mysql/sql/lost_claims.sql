-- Jobs executing for these producers, claimed before a time: a producer that does not run one of
-- them lost the reply of the fetch that claimed it, and gives it back.
SELECT id, attempt
FROM {prefix}.oban_jobs
WHERE state = 'executing'
  AND JSON_VALUE(attempted_by, '$[1]') IN %(producers)s
  AND attempted_at < %(claimed_before)s;
