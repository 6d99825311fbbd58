SELECT {columns} FROM {prefix}.oban_jobs WHERE id = %(id)s;
