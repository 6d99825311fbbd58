-- The state of each of some jobs (one poll for everyone waiting on this node: Conveyor.wait).
SELECT id, state FROM {prefix}.oban_jobs WHERE id IN %s;
