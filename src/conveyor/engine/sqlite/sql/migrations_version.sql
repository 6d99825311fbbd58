SELECT max(version) FROM conveyor_migrations;
