-- Conveyor's producers silent since before %(dead_before)s, the fetching one spared: their
-- executing jobs no longer take slots of a global limit (fetch_jobs' dead_after).
SELECT uuid FROM {prefix}.oban_producers
WHERE updated_at < %(dead_before)s AND JSON_VALUE(meta, '$.runtime') = 'conveyor' AND uuid <> %(producer)s;
