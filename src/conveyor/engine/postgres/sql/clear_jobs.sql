-- Every job, and nothing else: the test integrations empty the jobs between tests with it
-- (conveyor.contrib.django after Django flushes its own tables).
DELETE FROM {prefix}.oban_jobs;
