-- The record of a workflow whose steps a prune deleted (workflow_records.record_workflows gathers
-- each workflow's deleted steps), in conveyor_workflows (migration 13). Steps pruned in several
-- passes add up: the counts are summed, and the worse outcome wins (failed over cancelled over
-- completed) with its step. MySQL applies the assignments in order, each seeing the ones before:
-- failed_step is decided before state changes.
INSERT INTO {prefix}.conveyor_workflows (id, name, state, failed_step, counts, inserted_at, finished_at)
VALUES (%(id)s, %(name)s, %(state)s, %(failed_step)s, %(counts)s, %(inserted_at)s, %(finished_at)s)
ON DUPLICATE KEY UPDATE
    name = COALESCE(name, VALUES(name)),
    failed_step = CASE
        WHEN LOCATE(VALUES(state), 'completed cancelled failed')
             > COALESCE(LOCATE(state, 'completed cancelled failed'), 0)
        THEN VALUES(failed_step) ELSE COALESCE(failed_step, VALUES(failed_step)) END,
    state = CASE
        WHEN LOCATE(VALUES(state), 'completed cancelled failed')
             > COALESCE(LOCATE(state, 'completed cancelled failed'), 0)
        THEN VALUES(state) ELSE COALESCE(state, VALUES(state)) END,
    counts = JSON_OBJECT(
        'completed', COALESCE(JSON_VALUE(counts, '$.completed'), 0) + JSON_VALUE(VALUES(counts), '$.completed'),
        'cancelled', COALESCE(JSON_VALUE(counts, '$.cancelled'), 0) + JSON_VALUE(VALUES(counts), '$.cancelled'),
        'discarded', COALESCE(JSON_VALUE(counts, '$.discarded'), 0) + JSON_VALUE(VALUES(counts), '$.discarded')
    ),
    inserted_at = LEAST(inserted_at, VALUES(inserted_at)),
    finished_at = COALESCE(GREATEST(finished_at, VALUES(finished_at)), finished_at, VALUES(finished_at));
