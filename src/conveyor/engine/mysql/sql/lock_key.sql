GET_LOCK(%s, %s)
