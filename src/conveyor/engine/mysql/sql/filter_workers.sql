worker IN %(workers)s
