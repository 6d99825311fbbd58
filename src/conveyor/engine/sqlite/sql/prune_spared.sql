EXISTS (
          SELECT 1 FROM oban_jobs AS d
          WHERE d.state = 'suspended'
            AND (CASE WHEN json_valid(d.meta) THEN d.meta ->> 'workflow_id' END)
                = (CASE WHEN json_valid(j.meta) THEN j.meta ->> 'workflow_id' END)
      )
