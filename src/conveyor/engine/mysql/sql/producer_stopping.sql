-- A producer's meta with the runs a cancel stopped listed (meta.stopping): see list_stopping.
UPDATE {prefix}.oban_producers SET meta = %s WHERE uuid = %s;
