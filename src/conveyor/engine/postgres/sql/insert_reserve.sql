-- Reserve one id per job of a batch that insert_copy.sql then writes. The ids come from the table's
-- own sequence (identity or bigserial alike), ascending within one statement, so the jobs keep their
-- input order. The sequence is looked up once per statement (an init plan), not once per id.
SELECT array(
    SELECT nextval((SELECT pg_get_serial_sequence(format('%%I.oban_jobs', {prefix_literal}), 'id'))::regclass)
    FROM generate_series(1, %(count)s::integer)
) AS ids;
