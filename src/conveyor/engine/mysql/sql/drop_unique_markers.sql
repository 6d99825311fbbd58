-- A retried job whose key a twin holds runs as a plain job: it drops its unique markers.
UPDATE {prefix}.oban_jobs SET meta = JSON_REMOVE(meta, '$.uniq_key', '$.uniq_states') WHERE id IN %(ids)s;
