(j.meta ? 'workflow_id' AND EXISTS (
          SELECT 1 FROM {prefix}.oban_jobs AS d
          WHERE (d.meta ->> 'workflow_id') = (j.meta ->> 'workflow_id') AND {waiting_step}
      ))
