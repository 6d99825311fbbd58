id < %(before_id)s
