id IN %(ids)s
