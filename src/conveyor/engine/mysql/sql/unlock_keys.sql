-- Let go of named locks of unique keys a caller's insert took, one RELEASE_LOCK per lock taken (the
-- engine repeats the call per name): the session's other named locks stay held.
SELECT {calls};
