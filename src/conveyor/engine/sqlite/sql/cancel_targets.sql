-- The jobs cancel_jobs.sql will cancel (matching and not final yet), with the state they are in:
-- executing ones get Oban's "pkill" signal so their node stops them.
SELECT id, state FROM oban_jobs
WHERE {filter}
  AND state NOT IN ('completed', 'discarded', 'cancelled')
ORDER BY id
LIMIT :limit;
