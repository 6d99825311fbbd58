-- The workflow and name of the given jobs that are workflow steps (:ids: a JSON array of ids).
-- Nested CASEs guard malformed meta (another client's junk) from the JSON functions.
SELECT id, meta ->> 'workflow_id', meta -> 'dependents', state FROM oban_jobs
WHERE id IN (SELECT value FROM json_each(:ids)) AND (CASE WHEN json_valid(meta) THEN (CASE WHEN json_type(meta) = 'object' THEN meta ->> 'workflow_id' IS NOT NULL ELSE 0 END) ELSE 0 END);
