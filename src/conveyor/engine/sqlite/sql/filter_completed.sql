id IN (
    -- Through the partial index of completed jobs: without statistics SQLite would rather read
    -- every completed job through the fetch index (state = ?). A missing bound stands for ''
    -- (before any time) or '9' (after any), as times are text that starts with the year.
    SELECT id FROM oban_jobs INDEXED BY oban_jobs_completed_at_index
    WHERE state = 'completed'
      AND completed_at >= coalesce(:completed_after, '')
      AND completed_at < coalesce(:completed_before, '9')
)
