CASE
    WHEN jsonb_typeof(j.meta) = 'object' AND j.meta ? 'uniq_key'
        AND NOT coalesce(j.meta -> 'uniq_states' ? 'executing', false)
    THEN j.meta - 'uniq_key' - 'uniq_states'
    ELSE j.meta
END
