(%(queue)s IS NULL OR j.queue = %(queue)s)
      AND (%(worker)s IS NULL OR j.worker = %(worker)s)
      AND NOT EXISTS (
          SELECT 1 FROM JSON_TABLE(%(before)s, '$[*]' COLUMNS (
              queue VARCHAR(255) PATH '$.queue',
              worker VARCHAR(255) PATH '$.worker',
              states JSON PATH '$.states'
          )) AS r
          WHERE (r.queue IS NULL OR r.queue = j.queue)
            AND (r.worker IS NULL OR r.worker = j.worker)
            AND JSON_CONTAINS(r.states, JSON_QUOTE(j.state))
      )
