SELECT meta FROM oban_jobs WHERE id = :id;
