(CASE WHEN json_valid(meta) THEN meta ->> 'uniq_key' END)
