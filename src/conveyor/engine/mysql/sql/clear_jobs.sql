-- Every job, and nothing else (the test integrations empty the jobs between tests with it).
DELETE FROM {prefix}.oban_jobs;
