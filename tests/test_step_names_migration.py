"""Migration 10 makes a step name unique within its workflow. A database that already holds a name
twice in one workflow (stored before the index existed) is not migrated: the error names the
workflow and the step, and once one of the two is gone the migration goes through."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from conveyor import SchemaError
from conveyor.engine._migrations import MIGRATIONS
from conveyor.engine._sqlfiles import SqlFiles
from conveyor.engine.postgres import PostgresEngine
from conveyor.engine.postgres import schema as pg_schema
from conveyor.engine.sqlite import SqliteEngine
from conveyor.engine.sqlite import schema as sqlite_schema
from tests.helpers import execute

BEFORE = [m for m in MIGRATIONS if m.version < 10]
TWICE = """INSERT INTO {table} (worker, meta) VALUES
    ('W', '{{"workflow_id": "w-1", "name": "a"}}'), ('W', '{{"workflow_id": "w-1", "name": "a"}}'),
    ('W', '{{"workflow_id": "w-2", "name": "a"}}'), ('W', '{{"workflow_id": "w-1"}}'),
    ('W', '{{"workflow_id": "w-1"}}')"""
REFUSED = r"workflow 'w-1' has 2 steps named 'a'"


async def test_postgres_refuses_names_stored_twice_then_migrates(dsn: str, prefix: str) -> None:
    files = SqlFiles(pg_schema.SQL_PACKAGE, prefix)
    execute(dsn, "\n".join([files["migrations_table"], *(m.sql(files) for m in BEFORE)]))
    table = f'"{prefix}".oban_jobs'
    execute(dsn, TWICE.format(table=table))
    engine = PostgresEngine(dsn, prefix=prefix, max_connections=1)
    await engine.open()
    try:
        with pytest.raises(SchemaError, match=REFUSED):
            await engine.install()
        assert await engine.schema_version() == 9
        extra = f"SELECT max(id) FROM {table} WHERE meta ->> 'name' = 'a' AND meta ->> 'workflow_id' = 'w-1'"
        execute(dsn, f"DELETE FROM {table} WHERE id = ({extra})")
        assert await engine.install() == pg_schema.LATEST_VERSION
    finally:
        await engine.close()


async def test_sqlite_refuses_names_stored_twice_then_migrates(tmp_path: Path) -> None:
    path = tmp_path / "twice.db"
    with sqlite3.connect(path) as conn:
        files = sqlite_schema.FILES
        script = "\n".join([files["migrations_table"], *(m.sql(files) for m in BEFORE)])
        for statement in sqlite_schema.statements(script):
            conn.execute(statement)
        conn.execute(TWICE.format(table="oban_jobs"))
    engine = SqliteEngine(path)
    await engine.open()
    try:
        with pytest.raises(SchemaError, match=REFUSED):
            await engine.install()
        assert await engine.schema_version() == 9
        with sqlite3.connect(path) as conn:
            conn.execute("DELETE FROM oban_jobs WHERE id = 2")
        assert await engine.install() == sqlite_schema.LATEST_VERSION
    finally:
        await engine.close()
