-- How many jobs match a filter, counting no further than %(cap)s: the exact count of a filter the
-- planner expects to match few jobs (estimate_jobs.sql). A result of %(cap)s means "at least".
SELECT count(*) FROM (SELECT 1 FROM {prefix}.oban_jobs WHERE {filter} LIMIT %(cap)s) AS capped;
