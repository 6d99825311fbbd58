%(demand)s
