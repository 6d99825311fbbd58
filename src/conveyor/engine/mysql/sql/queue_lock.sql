-- The named lock of one queue's limited claims (hashed into MySQL's 64 characters): claims under
-- fleet-wide limits run one after the other, so each counts what the one before it claimed.
SELECT GET_LOCK(%s, %s);
