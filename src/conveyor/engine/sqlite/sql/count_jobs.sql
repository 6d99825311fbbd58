-- How many jobs match a filter, exactly.
SELECT count(*) FROM oban_jobs WHERE {filter};
