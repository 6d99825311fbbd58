INSERT INTO conveyor_migrations (version, name) VALUES ({version}, {name})
ON CONFLICT (version) DO NOTHING;
