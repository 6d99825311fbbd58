-- Append a message to a job's inbox (meta.signals) unless it is final or full. A scheduled job that
-- let go of its slot to wait for a message (meta.awaiting_signal) runs again now; an executing job's
-- node is told on the inbox channel. Another client's junk in meta is replaced, never a failure:
-- only an object is merged into, only an array appended to, only objects counted as messages.
WITH clock AS (
    SELECT coalesce(%(now)s::timestamp, timezone('UTC', now())) AS now
),
target AS MATERIALIZED (
    SELECT id, state::text AS state, queue,
        CASE WHEN jsonb_typeof(meta) = 'object' THEN meta ELSE '{}' END AS meta
    FROM {prefix}.oban_jobs WHERE id = %(id)s
    FOR UPDATE
),
inbox AS MATERIALIZED (
    SELECT t.*,
        CASE WHEN jsonb_typeof(t.meta -> 'signals') = 'array' THEN t.meta -> 'signals' ELSE '[]' END AS signals
    FROM target AS t
),
counted AS MATERIALIZED (
    SELECT i.*,
        (SELECT count(*) FROM jsonb_array_elements(i.signals) AS m WHERE jsonb_typeof(m) = 'object') AS messages,
        i.state = 'scheduled' AND jsonb_typeof(i.meta -> 'awaiting_signal') = 'object' AS wake
    FROM inbox AS i
),
appended AS (
    UPDATE {prefix}.oban_jobs AS j
    SET meta = c.meta || jsonb_build_object('signals', c.signals || jsonb_build_array(%(message)s::jsonb)),
        state = CASE WHEN c.wake THEN 'available'::{prefix}.oban_job_state ELSE j.state END,
        scheduled_at = CASE WHEN c.wake THEN clock.now ELSE j.scheduled_at END
    FROM counted AS c, clock
    WHERE j.id = c.id
      AND c.state NOT IN ('completed', 'discarded', 'cancelled')
      AND c.messages < %(limit)s
    RETURNING j.id, j.state::text AS state, j.queue, c.messages AS position, c.wake
),
told AS (
    SELECT pg_notify(%(insert_channel)s, jsonb_build_object('queue', queue)::text) FROM appended WHERE wake
    UNION ALL
    SELECT pg_notify(%(inbox_channel)s, jsonb_build_object('job_id', id)::text)
    FROM appended WHERE state = 'executing'
)
SELECT coalesce(a.state, c.state), a.position, (SELECT count(*) FROM told)
FROM counted AS c LEFT JOIN appended AS a ON true;
