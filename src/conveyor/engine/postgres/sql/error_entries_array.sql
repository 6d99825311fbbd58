unnest(j.errors)
