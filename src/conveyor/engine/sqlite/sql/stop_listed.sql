-- List cancelled executing jobs in their producers' rows (meta.stopping, by attempted_by's producer
-- uuid): a run cannot always stop at once (a thread job only gets a flag), so until that producer's
-- node says the run is over (its heartbeat's holding ids, upsert_producers.sql), the job keeps its
-- ordered lock and global-limit slot (stopping_ids.sql). A dead node's list goes with its row when
-- the leader deletes it. :ids is a JSON array of the job ids that were executing.
UPDATE oban_producers
SET meta = json_set(
    CASE WHEN json_valid(meta) AND json_type(meta) = 'object' THEN meta ELSE '{}' END,
    '$.stopping',
    json((
        SELECT json_group_array(v) FROM (
            SELECT e.value AS v FROM json_each(
                CASE WHEN json_valid(oban_producers.meta) AND json_type(oban_producers.meta, '$.stopping') = 'array'
                THEN oban_producers.meta ->> '$.stopping' ELSE '[]' END
            ) AS e
            UNION ALL
            SELECT j.id FROM oban_jobs AS j, json_each(:ids) AS i
            WHERE j.id = i.value AND json_valid(j.attempted_by) AND j.attempted_by ->> 1 = oban_producers.uuid
        )
    ))
)
WHERE uuid IN (
    SELECT j.attempted_by ->> 1 FROM oban_jobs AS j, json_each(:ids) AS i
    WHERE j.id = i.value AND json_valid(j.attempted_by)
);
