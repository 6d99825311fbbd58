-- Before a batch of jobs is written by COPY (insert_copy.sql): read the insert clock and reserve one
-- id per job. The ids come from the table's own sequence (identity or bigserial alike), ascending in
-- one statement, so the jobs keep their input order. The sequence is looked up once per statement.
SELECT
    coalesce(%(now)s::timestamp, timezone('UTC', now())) AS now,
    array(
        SELECT nextval((SELECT pg_get_serial_sequence(format('%%I.oban_jobs', {prefix_literal}), 'id'))::regclass)
        FROM generate_series(1, %(count)s::integer)
    ) AS ids;
