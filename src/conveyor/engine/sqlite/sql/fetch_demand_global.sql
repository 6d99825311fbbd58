max(0, min(:demand, :global_limit - (
    SELECT count(*) FROM oban_jobs WHERE state = 'executing' AND queue = :queue
)))
