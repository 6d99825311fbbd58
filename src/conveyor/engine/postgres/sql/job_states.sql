-- The state of each of some jobs (one poll for everyone waiting on this node: Conveyor.wait).
SELECT id, state::text FROM {prefix}.oban_jobs WHERE id = ANY(%(ids)s::bigint[]);
