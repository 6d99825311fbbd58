-- Forget the records of workflows that ended before :cutoff (a row still holding a lock is a
-- running workflow's, and stays).
DELETE FROM conveyor_workflows WHERE finished_at < :cutoff AND lock IS NULL;
