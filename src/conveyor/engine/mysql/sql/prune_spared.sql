(j.conveyor_workflow_id IS NOT NULL AND EXISTS (
          SELECT 1 FROM {prefix}.oban_jobs AS d
          WHERE d.conveyor_workflow_id = j.conveyor_workflow_id AND d.state = 'suspended'
      ))
