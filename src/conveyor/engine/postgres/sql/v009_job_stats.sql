-- Migration 9: what queue_counts and job_stats read (conveyor/stats.py).
--
-- The failed attempts of a window are read from the jobs that may have recorded one: every job past
-- its first attempt, and a job at its first attempt that is waiting to run again. A job that
-- succeeds at its first attempt, nearly every job, never enters this index, so fetch and ack add
-- entries to it only for jobs that failed. The key is the latest of the job's times, which is
-- never earlier than a failure it recorded: a retry schedules the job after the failure, and
-- whatever ends a job comes later still. The expressions are fragments (failed_jobs.sql,
-- failed_key.sql) that the statements reading the index repeat word for word.
CREATE INDEX IF NOT EXISTS conveyor_failed_jobs_index
ON {prefix}.oban_jobs (({failed_key}))
WHERE {failed_jobs};

-- queue_counts estimates the (state, queue) pairs too large to count in time. The planner alone
-- multiplies the share of the state by the share of the queue, which is far off whenever queues
-- differ (a queue of only available jobs gets a share of the completed ones); the joint statistics
-- of the two columns make the estimate of each pair its own. They cost ANALYZE a little, the
-- writes nothing.
CREATE STATISTICS IF NOT EXISTS {prefix}.conveyor_jobs_state_queue (mcv) ON state, queue
FROM {prefix}.oban_jobs;

-- The planner's estimate of the jobs of one state in one queue. The pair is planned as literals:
-- planned with parameters, the joint statistics above are not used.
CREATE OR REPLACE FUNCTION {prefix}.conveyor_count_estimate(state text, queue text)
RETURNS bigint AS $func$
DECLARE
    plan jsonb;
BEGIN
    EXECUTE format(
        'EXPLAIN (FORMAT JSON) SELECT 1 FROM %I.oban_jobs WHERE state = %L::%I.oban_job_state AND queue = %L',
        {prefix_literal}, state, {prefix_literal}, queue
    ) INTO plan;
    RETURN (plan -> 0 -> 'Plan' ->> 'Plan Rows')::numeric::bigint;
END;
$func$ LANGUAGE plpgsql;
