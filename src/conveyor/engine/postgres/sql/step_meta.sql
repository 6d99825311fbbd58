d.meta || '{}'::jsonb
