CASE WHEN json_valid(meta) THEN meta ->> 'uniq_key' IS NOT NULL AND instr(meta ->> 'uniq_states', '"' || state || '"') > 0 ELSE 0 END
