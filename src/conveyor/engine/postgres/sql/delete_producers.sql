DELETE FROM {prefix}.oban_producers WHERE uuid = ANY(%(uuids)s::uuid[]);
