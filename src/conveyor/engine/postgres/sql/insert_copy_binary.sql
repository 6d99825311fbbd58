-- The same COPY in the binary format (copy_rows.BinaryRows), for a table whose columns have the
-- types of Conveyor's own migrations (insert_clock.sql tells).
{insert_copy} (FORMAT binary)
