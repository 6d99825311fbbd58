SELECT queue, paused, local_limit FROM {prefix}.conveyor_queue_states WHERE name = %(name)s;
