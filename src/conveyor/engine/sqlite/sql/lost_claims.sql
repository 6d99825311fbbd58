-- Jobs executing for these producers (:producers, a JSON array), claimed before :claimed_before. A
-- producer that does not run one of them lost the reply of the fetch that claimed it, and gives it back.
SELECT id, attempt
FROM oban_jobs
WHERE state = 'executing'
  AND attempted_by ->> 1 IN (SELECT value FROM json_each(:producers))
  AND attempted_at < :claimed_before;
