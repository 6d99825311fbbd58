-- The record of a workflow whose steps a prune deleted (workflow_records.py gathers each
-- workflow's deleted steps), in conveyor_workflows (migration 13), kept by its own age
-- (prune_workflow_records.sql). Steps pruned in several passes add up: the counts are summed, and
-- the worse outcome wins (failed over cancelled over completed) with its step.
INSERT INTO conveyor_workflows AS w (id, name, state, failed_step, counts, inserted_at, finished_at)
VALUES (:id, :name, :state, :failed_step, :counts, :inserted_at, :finished_at)
ON CONFLICT (id) DO UPDATE SET
    name = coalesce(w.name, excluded.name),
    failed_step = CASE
        WHEN instr('completed cancelled failed', excluded.state)
             > coalesce(instr('completed cancelled failed', w.state), 0)
        THEN excluded.failed_step ELSE coalesce(w.failed_step, excluded.failed_step) END,
    state = CASE
        WHEN instr('completed cancelled failed', excluded.state)
             > coalesce(instr('completed cancelled failed', w.state), 0)
        THEN excluded.state ELSE coalesce(w.state, excluded.state) END,
    counts = json_object(
        'completed', coalesce(json_extract(w.counts, '$.completed'), 0) + json_extract(excluded.counts, '$.completed'),
        'cancelled', coalesce(json_extract(w.counts, '$.cancelled'), 0) + json_extract(excluded.counts, '$.cancelled'),
        'discarded', coalesce(json_extract(w.counts, '$.discarded'), 0) + json_extract(excluded.counts, '$.discarded')
    ),
    inserted_at = min(w.inserted_at, excluded.inserted_at),
    finished_at = max(coalesce(w.finished_at, ''), excluded.finished_at);
