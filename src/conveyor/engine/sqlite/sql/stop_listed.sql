-- List cancelled executing jobs in their producers' rows (meta.stopping, by attempted_by's producer
-- uuid): a run cannot always stop at once (a thread job only gets a flag), so until that producer's
-- node says the run is over (its heartbeat's holding ids, upsert_producers.sql), the job keeps its
-- ordered lock and global-limit slot (stopping_ids.sql). A dead node's list goes with its row when
-- the leader deletes it. Only Conveyor's rows (meta.runtime): another runtime's beats would never let
-- go. :ids is a JSON array of the job ids that were executing.
UPDATE oban_producers
SET meta = json_set(
    coalesce(CASE WHEN json_valid(meta) THEN CASE WHEN json_type(meta) = 'object' THEN meta END END, '{}'),
    '$.stopping',
    json((
        SELECT json_group_array(v) FROM (
            SELECT e.value AS v FROM json_each(
                coalesce(CASE WHEN json_valid(oban_producers.meta) THEN CASE
                    WHEN json_type(oban_producers.meta, '$.stopping') = 'array' THEN oban_producers.meta ->> '$.stopping'
                END END, '[]')
            ) AS e
            UNION ALL
            SELECT j.id FROM oban_jobs AS j, json_each(:ids) AS i
            WHERE j.id = i.value
              AND CASE WHEN json_valid(j.attempted_by) THEN j.attempted_by ->> 1 END = oban_producers.uuid
        )
    ))
)
WHERE CASE WHEN json_valid(meta) THEN CASE WHEN json_type(meta) = 'object' THEN meta ->> 'runtime' END END = 'conveyor'
  AND uuid IN (
    SELECT CASE WHEN json_valid(j.attempted_by) THEN j.attempted_by ->> 1 END
    FROM oban_jobs AS j, json_each(:ids) AS i
    WHERE j.id = i.value
);
