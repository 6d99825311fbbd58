-- The clock of a COPY insert (see insert_copy.sql): the injected time, or the database's own (the
-- transaction's start, as insert_jobs.sql uses), as the naive UTC timestamp oban_jobs stores.
SELECT coalesce(%(now)s::timestamp, timezone('UTC', now())) AS now;
