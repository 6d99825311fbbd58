-- Delete matching jobs, except executing ones: their node still owns them.
DELETE FROM oban_jobs
WHERE id IN (
    SELECT id FROM oban_jobs
    WHERE {filter}
      AND state <> 'executing'
    ORDER BY id
    LIMIT :limit
)
RETURNING id;
