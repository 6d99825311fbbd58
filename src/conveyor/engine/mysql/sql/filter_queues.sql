queue IN %(queues)s
