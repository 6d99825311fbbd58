DELETE FROM oban_producers WHERE uuid IN (SELECT value FROM json_each(:uuids));
