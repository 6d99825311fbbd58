INSERT INTO {prefix}.conveyor_migrations (version, name)
VALUES ({version}, {name})
ON CONFLICT (version) DO NOTHING;
