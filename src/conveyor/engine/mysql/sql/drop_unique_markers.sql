-- A retried job whose key a twin holds runs as a plain job: it drops its unique markers.
-- By the primary key only, whatever the table's size (ack_targets.sql says why).
UPDATE {prefix}.oban_jobs FORCE INDEX (PRIMARY) SET meta = JSON_REMOVE(meta, '$.uniq_key', '$.uniq_states') WHERE id IN %(ids)s;
