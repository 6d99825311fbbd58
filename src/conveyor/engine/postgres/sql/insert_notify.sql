-- After a COPY insert: tell each queue that gained available jobs, in the inserting transaction, so
-- listeners hear of the jobs when they become visible (on commit). Same payload as insert_jobs.sql.
SELECT pg_notify(%(channel)s, jsonb_build_object('queue', queue)::text)
FROM unnest(%(queues)s::text[]) AS queue;
