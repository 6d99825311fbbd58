-- The state of each of some jobs (one poll for everyone waiting on this node: Conveyor.wait).
SELECT j.id, j.state FROM oban_jobs AS j WHERE j.id IN (SELECT value FROM json_each(:ids));
