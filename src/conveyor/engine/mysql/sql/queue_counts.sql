-- The jobs of every queue in every state, exactly, and the earliest scheduled_at of each queue's
-- available jobs: one pass over the fetch index (state, queue, priority, scheduled_at, id), which
-- holds every column read here.
SELECT state, queue, COUNT(*), CASE WHEN state = 'available' THEN MIN(scheduled_at) END
FROM {prefix}.oban_jobs
GROUP BY state, queue;
