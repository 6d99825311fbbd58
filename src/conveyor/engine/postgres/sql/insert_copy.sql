-- A batch of jobs in COPY's text format, with ids reserved by insert_reserve.sql. COPY writes the
-- given ids even into the GENERATED ALWAYS identity column; state and times come from the client,
-- computed from the clock insert_reserve.sql returned. Columns in rows.COPY_COLUMNS order.
COPY {prefix}.oban_jobs (
    id, state, queue, worker, args, meta, tags, priority, max_attempts, scheduled_at, inserted_at
) FROM STDIN
