SELECT max(version) FROM {prefix}.conveyor_migrations;
