CASE WHEN json_valid(meta) THEN
    CASE
        WHEN meta ->> 'uniq_key' IS NOT NULL AND instr(coalesce(meta ->> 'uniq_states', ''), '"executing"') = 0
        THEN json_remove(meta, '$.uniq_key', '$.uniq_states')
        ELSE meta
    END
ELSE meta END
