-- The clock of a COPY insert (see insert_copy.sql): the injected time, or the database's own (the
-- transaction's start, as insert_jobs.sql uses), as the naive UTC timestamp oban_jobs stores; and
-- whether the table's columns have exactly the types of Conveyor's (and oban-py's) migrations, so
-- that the rows can be sent in COPY's binary format (insert_copy_binary.sql), which names types.
-- A table Elixir Oban created (integer priority, varchar[] tags, ...) takes the text format.
SELECT
    coalesce(%(now)s::timestamp, timezone('UTC', now())) AS now,
    (
        SELECT count(*) = 10
        FROM pg_attribute
        WHERE attrelid = format('%%I.oban_jobs', {prefix_literal})::regclass
          AND NOT attisdropped
          AND (attname, atttypid) IN (
              ('queue', 'text'::regtype), ('worker', 'text'::regtype),
              ('args', 'jsonb'::regtype), ('meta', 'jsonb'::regtype), ('tags', 'text[]'::regtype),
              ('priority', 'smallint'::regtype), ('max_attempts', 'smallint'::regtype),
              ('scheduled_at', 'timestamp'::regtype), ('inserted_at', 'timestamp'::regtype),
              ('id', 'bigint'::regtype)
          )
    ) AS binary_layout;
