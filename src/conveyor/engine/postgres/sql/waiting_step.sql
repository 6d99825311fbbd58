d.meta ? 'workflow_id' AND d.state NOT IN ('available', 'scheduled', 'executing', 'retryable', 'completed', 'discarded', 'cancelled')
