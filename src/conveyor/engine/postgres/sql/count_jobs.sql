-- How many jobs match a filter, exactly. Run unprepared (each call planned with its values), so the
-- criteria left out fold away and the index that fits what is asked is used: the fetch index for
-- states and queues, the partial index of completed jobs for completed_after/completed_before.
SELECT count(*) FROM {prefix}.oban_jobs WHERE {filter};
