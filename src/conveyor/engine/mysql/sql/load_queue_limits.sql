SELECT queue, limits FROM {prefix}.conveyor_queue_limits WHERE name = %(name)s FOR UPDATE;
