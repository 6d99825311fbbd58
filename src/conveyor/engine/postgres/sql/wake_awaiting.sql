-- Jobs that let go of their slot to wait for a message (meta.awaiting_signal.position) while that
-- message was being sent: run them again now. Nested CASEs keep junk in meta from failing a cast.
WITH clock AS (
    SELECT coalesce(%(now)s::timestamp, timezone('UTC', now())) AS now
),
woken AS (
    UPDATE {prefix}.oban_jobs AS j
    SET state = 'available', scheduled_at = clock.now
    FROM clock
    WHERE j.id = ANY(%(ids)s::bigint[])
      AND j.state::text = 'scheduled'
      AND CASE WHEN jsonb_typeof(j.meta -> 'awaiting_signal' -> 'position') = 'number'
          AND jsonb_typeof(j.meta -> 'signals') = 'array'
          THEN (j.meta -> 'awaiting_signal' ->> 'position')::numeric < (
              SELECT count(*) FROM jsonb_array_elements(j.meta -> 'signals') AS m WHERE jsonb_typeof(m) = 'object')
          ELSE false
      END
    RETURNING j.id, j.queue
),
told AS (
    SELECT pg_notify(%(insert_channel)s, jsonb_build_object('queue', queue)::text)
    FROM (SELECT DISTINCT queue FROM woken) AS q
)
SELECT id, (SELECT count(*) FROM told) FROM woken ORDER BY id;
