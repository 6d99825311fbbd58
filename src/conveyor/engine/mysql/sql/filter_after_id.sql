id > %(after_id)s
