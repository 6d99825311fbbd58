-- The queues that hold final jobs (for keep_per_queue), read through the fetch index.
SELECT DISTINCT queue FROM {prefix}.oban_jobs WHERE state IN ('completed', 'cancelled', 'discarded');
