DELETE FROM {prefix}.oban_crons WHERE name = %(name)s;
