id > :after_id
