(:queue IS NULL OR j.queue = :queue)
      AND (:worker IS NULL OR j.worker = :worker)
      AND NOT EXISTS (
          SELECT 1 FROM json_each(:before) AS r
          WHERE (r.value ->> 'queue' IS NULL OR r.value ->> 'queue' = j.queue)
            AND (r.value ->> 'worker' IS NULL OR r.value ->> 'worker' = j.worker)
            AND EXISTS (SELECT 1 FROM json_each(r.value, '$.states') AS s WHERE s.value = j.state)
      )
