NOT EXISTS (
    SELECT 1 FROM json_each(:tags) AS wanted
    WHERE wanted.value NOT IN (SELECT value FROM json_each(oban_jobs.tags))
)
