-- The planner's estimate of the jobs matching a filter: the plan's row estimate, from the table's
-- statistics (each state a literal, a time range read from the histogram of its column). Run
-- unprepared, like count_jobs.sql, so it is planned with the filter's values.
EXPLAIN (FORMAT JSON) SELECT 1 FROM {prefix}.oban_jobs WHERE {filter};
