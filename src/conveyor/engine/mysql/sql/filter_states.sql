state IN %(states)s
