-- Migration 8: workflows (conveyor/workflow.py). A step is found by its workflow and name (a name is
-- unique within its workflow: migration 10 replaces the first index below with a unique one), and the suspended steps of a workflow are found by the workflow alone
-- when one of its steps finishes. The second index holds only suspended rows, so it stays as small
-- as the workflows waiting now. 'suspended' is named as "none of the others" (see v004): a literal
-- of it would fail in the transaction that added it to an older Oban's type.
CREATE INDEX IF NOT EXISTS conveyor_workflow_steps_index
ON {prefix}.oban_jobs ((meta ->> 'workflow_id'), (meta ->> 'name'))
WHERE meta ? 'workflow_id';
CREATE INDEX IF NOT EXISTS conveyor_workflow_waiting_index
ON {prefix}.oban_jobs ((meta ->> 'workflow_id'))
WHERE meta ? 'workflow_id'
  AND state NOT IN ('available', 'scheduled', 'executing', 'retryable', 'completed', 'discarded', 'cancelled');
