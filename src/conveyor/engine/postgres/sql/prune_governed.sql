(%(queue)s::text IS NULL OR j.queue = %(queue)s)
      AND (%(worker)s::text IS NULL OR j.worker = %(worker)s)
      AND NOT EXISTS (
          SELECT 1 FROM jsonb_to_recordset(%(before)s::jsonb) AS r(queue text, worker text, states text[])
          WHERE (r.queue IS NULL OR r.queue = j.queue)
            AND (r.worker IS NULL OR r.worker = j.worker)
            AND j.state::text = ANY (r.states)
      )
