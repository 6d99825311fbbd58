-- Named locks on unique keys, one GET_LOCK per key (the engine repeats the call per key, in sorted
-- order); each returns 1 once taken, 0 when the wait timed out.
SELECT {calls};
