-- By the primary key only, whatever the table's size (ack_targets.sql says why).
UPDATE {prefix}.oban_jobs FORCE INDEX (PRIMARY) SET priority = priority - 1 WHERE id IN %(ids)s;
