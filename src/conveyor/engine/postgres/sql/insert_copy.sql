-- A batch of jobs in COPY's text format (copy_rows.TextRows writes the columns in this order). The ids were
-- reserved by insert_reserve.sql: COPY writes given values even into the GENERATED ALWAYS identity.
-- State and times are computed by the client from insert_clock.sql's clock, as insert_jobs.sql would.
COPY {prefix}.oban_jobs (
    state, queue, worker, args, meta, tags, priority, max_attempts, scheduled_at, inserted_at, id
) FROM STDIN
