DELETE FROM {prefix}.oban_producers WHERE uuid IN %(uuids)s;
