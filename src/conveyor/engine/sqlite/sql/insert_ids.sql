-- The ids of an insert when they were not consecutive (see insert_last_id.sql): ids only grow, so
-- the rows from the first id on, in id order, are the inserted jobs in input order.
SELECT id FROM oban_jobs WHERE id >= ? ORDER BY id LIMIT ?;
