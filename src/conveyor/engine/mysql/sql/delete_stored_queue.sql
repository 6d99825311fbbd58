DELETE FROM {prefix}.oban_queues WHERE name = %(name)s;
