(worker = %(worker_suffix)s OR RIGHT(worker, CHAR_LENGTH(%(worker_suffix)s) + 1) = CONCAT('.', %(worker_suffix)s))
