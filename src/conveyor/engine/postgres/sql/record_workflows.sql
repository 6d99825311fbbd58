recorded AS (
    -- A compact record of each workflow whose steps a prune deletes, kept in conveyor_workflows
    -- (migration 13) by its own age (prune_workflow_records.sql), so workflow_status still tells how
    -- it ended once its steps are gone. Steps pruned in several passes add up: the counts are
    -- summed, and the worse outcome wins (failed over cancelled over completed) with its step. A
    -- run_if step cancelled (a batch callback not called for) does not make it cancelled.
    INSERT INTO {prefix}.conveyor_workflows AS w
        (id, name, state, failed_step, counts, inserted_at, finished_at)
    SELECT
        d.workflow,
        max(d.workflow_name),
        CASE WHEN bool_or(d.state = 'discarded') THEN 'failed'
             WHEN bool_or(d.state = 'cancelled' AND NOT d.run_if) THEN 'cancelled'
             ELSE 'completed' END,
        coalesce(
            (array_agg(d.name ORDER BY d.id) FILTER (WHERE d.state = 'discarded'))[1],
            (array_agg(d.name ORDER BY d.id) FILTER (WHERE d.state = 'cancelled' AND NOT d.run_if))[1]
        ),
        jsonb_build_object(
            'completed', count(*) FILTER (WHERE d.state = 'completed'),
            'cancelled', count(*) FILTER (WHERE d.state = 'cancelled'),
            'discarded', count(*) FILTER (WHERE d.state = 'discarded')
        ),
        min(d.inserted_at),
        max(d.ended_at)
    FROM deleted AS d
    WHERE d.workflow IS NOT NULL
    GROUP BY d.workflow
    ON CONFLICT (id) DO UPDATE SET
        name = coalesce(w.name, EXCLUDED.name),
        failed_step = CASE
            WHEN array_position(ARRAY['completed', 'cancelled', 'failed'], EXCLUDED.state)
                 > array_position(ARRAY['completed', 'cancelled', 'failed'], w.state)
            THEN EXCLUDED.failed_step ELSE coalesce(w.failed_step, EXCLUDED.failed_step) END,
        state = CASE
            WHEN array_position(ARRAY['completed', 'cancelled', 'failed'], EXCLUDED.state)
                 > array_position(ARRAY['completed', 'cancelled', 'failed'], w.state)
            THEN EXCLUDED.state ELSE coalesce(w.state, EXCLUDED.state) END,
        counts = jsonb_build_object(
            'completed', coalesce((w.counts ->> 'completed')::bigint, 0) + (EXCLUDED.counts ->> 'completed')::bigint,
            'cancelled', coalesce((w.counts ->> 'cancelled')::bigint, 0) + (EXCLUDED.counts ->> 'cancelled')::bigint,
            'discarded', coalesce((w.counts ->> 'discarded')::bigint, 0) + (EXCLUDED.counts ->> 'discarded')::bigint
        ),
        inserted_at = least(w.inserted_at, EXCLUDED.inserted_at),
        finished_at = greatest(w.finished_at, EXCLUDED.finished_at)
    RETURNING 1
)
