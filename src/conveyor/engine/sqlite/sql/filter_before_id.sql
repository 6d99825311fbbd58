id < :before_id
