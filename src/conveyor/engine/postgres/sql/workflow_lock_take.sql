-- Enqueuers of workflows with one lock (Workflow(lock=...)) go one at a time: this transaction
-- waits here until the one before it has committed (or rolled back), so the holder it reads next
-- includes that one's workflow. The key is hashed with the schema, so two schemas never wait on
-- each other; a hash collision only makes two locks wait on each other a moment.
SELECT pg_advisory_xact_lock(hashtextextended(%(key)s, 0));
