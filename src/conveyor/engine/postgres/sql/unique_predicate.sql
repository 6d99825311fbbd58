meta ? 'uniq_key' AND meta -> 'uniq_states' ? {prefix}.conveyor_state_label(state)
