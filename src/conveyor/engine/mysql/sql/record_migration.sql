INSERT INTO {prefix}.conveyor_migrations (version, name) VALUES ({version}, {name})
ON DUPLICATE KEY UPDATE version = version;
