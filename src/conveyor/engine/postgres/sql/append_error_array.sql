array_append(coalesce(j.errors, '{}'), a.error)
