JSON_CONTAINS(tags, %(tags)s)
