array_append(j.errors, a.error)
