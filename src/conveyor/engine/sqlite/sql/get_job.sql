SELECT {columns} FROM oban_jobs WHERE id = :id;
