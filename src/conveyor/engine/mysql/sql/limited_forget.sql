DELETE FROM {prefix}.conveyor_queue_starts WHERE queue = %(queue)s AND started_at <= %(forget_before)s;
