-- The job a signal is for (engine/sqlite/relay.py decides the rest in the same write transaction).
SELECT state, queue, meta FROM oban_jobs WHERE id = :id;
