"""Installing, upgrading and removing the Oban-compatible schema, from Python, raw SQL and the CLI."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner

from conveyor import Conveyor, JobRequest, JobState, SchemaError
from conveyor.cli.main import main
from conveyor.engine._sqlfiles import SqlFiles
from conveyor.engine.postgres import PostgresEngine, schema
from tests.helpers import count_jobs, execute

CONSTRAINTS = {
    "attempt_range",
    "queue_length",
    "worker_length",
    "positive_max_attempts",
    "non_negative_priority",
}
INDEXES = {
    "oban_jobs_state_queue_priority_scheduled_at_id_index",
    "oban_jobs_staging_index",
    "oban_jobs_completed_at_index",
    "oban_jobs_cancelled_at_index",
    "oban_jobs_discarded_at_index",
}
TABLES = {"oban_jobs", "oban_leaders", "oban_producers", "conveyor_migrations"}
LATEST = schema.LATEST_VERSION
ALL_MIGRATIONS = [(m.version, m.name) for m in schema.MIGRATIONS]


def query(dsn: str, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(statement.encode(), params).fetchall()


def tables_in(dsn: str, prefix: str) -> set[str]:
    rows = query(dsn, "SELECT tablename FROM pg_tables WHERE schemaname = %s", (prefix,))
    return {r[0] for r in rows}


def objects_in(dsn: str, namespace: str) -> set[tuple[str, str]]:
    """Every relation, type and function in a schema, as (kind, name)."""
    rows = query(
        dsn,
        """
        SELECT 'rel', c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = %(ns)s
        UNION ALL
        SELECT 'type', t.typname FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
        WHERE n.nspname = %(ns)s
        UNION ALL
        SELECT 'proc', p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname = %(ns)s
        """,
        {"ns": namespace},
    )
    return {(r[0], r[1]) for r in rows}


def table_comment(dsn: str, prefix: str) -> str | None:
    rows = query(dsn, "SELECT obj_description(to_regclass(%s), 'pg_class')", (f'"{prefix}".oban_jobs',))
    return rows[0][0]


def migrations(dsn: str, prefix: str) -> list[tuple[Any, ...]]:
    return query(dsn, f'SELECT version, name FROM "{prefix}".conveyor_migrations ORDER BY version')


async def test_install_twice_is_idempotent(engine: PostgresEngine, dsn: str, prefix: str) -> None:
    assert await engine.schema_version() == LATEST
    before = objects_in(dsn, prefix)
    assert await engine.install() == LATEST
    assert await engine.install() == LATEST
    assert await engine.schema_version() == LATEST
    assert migrations(dsn, prefix) == ALL_MIGRATIONS
    assert objects_in(dsn, prefix) == before


async def test_install_into_a_prefix_touches_nothing_in_public(dsn: str, prefix: str) -> None:
    public_before = objects_in(dsn, "public")
    engine = PostgresEngine(dsn, prefix=prefix, max_connections=1)
    await engine.open()
    try:
        assert await engine.schema_version() is None
        assert await engine.install() == LATEST
    finally:
        await engine.close()
    assert tables_in(dsn, prefix) >= TABLES
    assert ("type", "oban_job_state") in objects_in(dsn, prefix)
    assert ("proc", "oban_count_estimate") in objects_in(dsn, prefix)
    assert objects_in(dsn, "public") == public_before


async def test_concurrent_installs_both_succeed(dsn: str, prefix: str) -> None:
    engines = [PostgresEngine(dsn, prefix=prefix, max_connections=1) for _ in range(3)]
    for engine in engines:
        await engine.open()
    try:
        assert await asyncio.gather(*(e.install() for e in engines)) == [LATEST] * 3
    finally:
        for engine in engines:
            await engine.close()
    assert migrations(dsn, prefix) == ALL_MIGRATIONS


async def test_install_sql_runs_with_plain_psycopg_twice(dsn: str, prefix: str) -> None:
    text = schema.install_sql(prefix)
    assert f'"{prefix}".oban_jobs' in text
    for _ in range(2):
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(text.encode())
    assert tables_in(dsn, prefix) >= TABLES
    assert migrations(dsn, prefix) == ALL_MIGRATIONS
    # The schema works: Conveyor sees it as current and can enqueue into it.
    async with Conveyor(dsn, prefix=prefix) as app:
        engine = await app.engine()
        assert isinstance(engine, PostgresEngine)
        assert await engine.schema_version() == LATEST
        await engine.check_schema()
        found = await app.get_job(await app.enqueue(JobRequest("tests.w")))
        assert found is not None and found.state is JobState.AVAILABLE


async def test_install_applies_only_the_missing_migrations(dsn: str, prefix: str) -> None:
    files = SqlFiles(schema.SQL_PACKAGE, prefix)
    execute(dsn, files["migrations_table"] + "\n" + schema.MIGRATIONS[0].sql(files))
    execute(dsn, f"INSERT INTO \"{prefix}\".oban_jobs (worker) VALUES ('Kept.Worker')")
    engine = PostgresEngine(dsn, prefix=prefix, max_connections=1)
    await engine.open()
    try:
        assert await engine.schema_version() == 1
        assert await engine.install() == LATEST
        assert await engine.schema_version() == LATEST
    finally:
        await engine.close()
    assert migrations(dsn, prefix) == ALL_MIGRATIONS
    assert count_jobs(dsn, prefix) == 1


async def test_install_sql_from_the_latest_version_only_creates_the_migrations_table(prefix: str) -> None:
    text = schema.install_sql(prefix, from_version=schema.LATEST_VERSION)
    assert f'CREATE TABLE IF NOT EXISTS "{prefix}".conveyor_migrations' in text
    assert f'CREATE TABLE IF NOT EXISTS "{prefix}".oban_jobs' not in text
    assert f'CREATE TABLE IF NOT EXISTS "{prefix}".oban_jobs' in schema.install_sql(prefix)


async def test_uninstall_removes_everything(engine: PostgresEngine, dsn: str, prefix: str) -> None:
    await engine.uninstall()
    assert tables_in(dsn, prefix) == set()
    assert objects_in(dsn, prefix) == set()
    assert await engine.schema_version() is None
    with pytest.raises(SchemaError, match="is not installed: run `conveyor install`"):
        await engine.check_schema()
    # Uninstalling twice is harmless, and installing again works.
    await engine.uninstall()
    assert await engine.install() == LATEST
    assert tables_in(dsn, prefix) >= TABLES


def test_uninstall_sql_runs_with_plain_psycopg(dsn: str, prefix: str) -> None:
    execute(dsn, schema.install_sql(prefix))
    execute(dsn, schema.uninstall_sql(prefix))
    assert tables_in(dsn, prefix) == set()


async def test_install_never_writes_the_oban_comment(engine: PostgresEngine, dsn: str, prefix: str) -> None:
    assert table_comment(dsn, prefix) is None
    # Elixir Oban records its migration version as the table comment.
    execute(dsn, f"COMMENT ON TABLE \"{prefix}\".oban_jobs IS '12'")
    await engine.install()
    assert table_comment(dsn, prefix) == "12"
    # As on a database Oban installed and Conveyor never saw: the whole migration runs again.
    execute(dsn, f'DROP TABLE "{prefix}".conveyor_migrations')
    assert await engine.schema_version() is None
    assert await engine.install() == LATEST
    assert table_comment(dsn, prefix) == "12"
    assert migrations(dsn, prefix) == ALL_MIGRATIONS


async def test_install_over_an_existing_oban_table_keeps_its_jobs(
    engine: PostgresEngine, dsn: str, prefix: str
) -> None:
    execute(dsn, f"INSERT INTO \"{prefix}\".oban_jobs (worker, queue) VALUES ('Elixir.Worker', 'old')")
    execute(dsn, f'DROP TABLE "{prefix}".conveyor_migrations')
    assert await engine.install() == LATEST
    assert count_jobs(dsn, prefix) == 1


async def test_install_adds_suspended_to_an_older_oban_enum(dsn: str, prefix: str) -> None:
    execute(dsn, f'CREATE SCHEMA "{prefix}"')
    execute(
        dsn,
        f"CREATE TYPE \"{prefix}\".oban_job_state AS ENUM ('available', 'scheduled', 'executing', "
        "'retryable', 'completed', 'discarded', 'cancelled')",
    )
    engine = PostgresEngine(dsn, prefix=prefix, max_connections=1)
    await engine.open()
    try:
        assert await engine.install() == LATEST
    finally:
        await engine.close()
    rows = query(dsn, f'SELECT unnest(enum_range(NULL::"{prefix}".oban_job_state))::text')
    assert {r[0] for r in rows} == {s.value for s in JobState}


async def test_check_constraints_exist_and_hold(engine: PostgresEngine, dsn: str, prefix: str) -> None:
    rows = query(
        dsn,
        "SELECT conname FROM pg_constraint WHERE conrelid = to_regclass(%s) AND contype = 'c'",
        (f'"{prefix}".oban_jobs',),
    )
    assert {r[0] for r in rows} >= CONSTRAINTS
    table = f'"{prefix}".oban_jobs'
    bad_rows = {
        "queue_length": "(worker, queue) VALUES ('W', '')",
        "worker_length": "(worker) VALUES ('')",
        "positive_max_attempts": "(worker, max_attempts, attempt) VALUES ('W', 0, 0)",
        "non_negative_priority": "(worker, priority) VALUES ('W', -1)",
        "attempt_range": "(worker, attempt, max_attempts) VALUES ('W', 3, 2)",
    }
    for name, values in bad_rows.items():
        with pytest.raises(psycopg.errors.CheckViolation, match=name):
            execute(dsn, f"INSERT INTO {table} {values}")
    assert count_jobs(dsn, prefix) == 0


async def test_named_indexes_exist(engine: PostgresEngine, dsn: str, prefix: str) -> None:
    rows = query(
        dsn, "SELECT indexname FROM pg_indexes WHERE schemaname = %s AND tablename = 'oban_jobs'", (prefix,)
    )
    assert {r[0] for r in rows} >= INDEXES


# -- the command line ------------------------------------------------------------------------


def test_cli_install_migrate_uninstall(dsn: str, prefix: str) -> None:
    runner = CliRunner()
    args = ["--dsn", dsn, "--prefix", prefix]

    result = runner.invoke(main, ["install", *args])
    assert result.exit_code == 0, result.output
    assert f"installed at version {LATEST} (was absent)" in result.output
    assert tables_in(dsn, prefix) >= TABLES

    result = runner.invoke(main, ["install", *args])
    assert result.exit_code == 0, result.output
    assert f"schema {prefix!r} already at version {LATEST}" in result.output

    result = runner.invoke(main, ["migrate", *args])
    assert result.exit_code == 0, result.output
    assert f"schema {prefix!r} already at version {LATEST}" in result.output

    # Without --yes, answering no keeps everything.
    result = runner.invoke(main, ["uninstall", *args], input="n\n")
    assert result.exit_code == 1
    assert "Aborted" in result.output
    assert tables_in(dsn, prefix) >= TABLES

    result = runner.invoke(main, ["uninstall", *args], input="y\n")
    assert result.exit_code == 0, result.output
    assert tables_in(dsn, prefix) == set()

    result = runner.invoke(main, ["migrate", *args])
    assert result.exit_code == 0, result.output
    assert f"version absent → {LATEST}: applying {LATEST} migrations" in result.output
    assert f"schema {prefix!r} now at version {LATEST}" in result.output

    result = runner.invoke(main, ["uninstall", "--yes", *args])
    assert result.exit_code == 0, result.output
    assert f"schema objects removed from {prefix!r}" in result.output
    assert tables_in(dsn, prefix) == set()


def test_cli_reads_dsn_and_prefix_from_the_environment(dsn: str, prefix: str) -> None:
    runner = CliRunner(env={"CONVEYOR_DATABASE_URL": dsn, "CONVEYOR_PREFIX": prefix})
    result = runner.invoke(main, ["install"])
    assert result.exit_code == 0, result.output
    assert tables_in(dsn, prefix) >= TABLES


def test_cli_schema_commands_read_the_config_file(
    dsn: str, prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    runner = CliRunner(env={"CONVEYOR_DATABASE_URL": None, "CONVEYOR_PREFIX": None})
    # Found in the working directory, like every other command finds it.
    (tmp_path / "conveyor.toml").write_text(f'database_url = "{dsn}"\nprefix = "{prefix}"\n')
    result = runner.invoke(main, ["install"])
    assert result.exit_code == 0, result.output
    assert f"schema {prefix!r} installed" in result.output
    assert tables_in(dsn, prefix) >= TABLES
    assert not (tmp_path / "conveyor.db").exists()
    # An explicit --config, and a --prefix that wins over it.
    other = tmp_path / "elsewhere.toml"
    other.write_text(f'database_url = "{dsn}"\nprefix = "not_this_one"\n')
    result = runner.invoke(main, ["uninstall", "--yes", "--config", str(other), "--prefix", prefix])
    assert result.exit_code == 0, result.output
    assert tables_in(dsn, prefix) == set()
    # A bad file is a usage error that names the problem, not a traceback.
    other.write_text('prefix = "no spaces allowed"\n')
    result = runner.invoke(main, ["migrate", "--config", str(other)])
    assert result.exit_code == 2
    assert "prefix" in result.output and "no spaces allowed" in result.output


def test_cli_print_sql_changes_nothing(dsn: str, prefix: str) -> None:
    result = CliRunner().invoke(main, ["install", "--print-sql", "--dsn", dsn, "--prefix", prefix])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == schema.install_sql(prefix).strip()
    assert tables_in(dsn, prefix) == set()


def test_cli_without_a_dsn_installs_the_default_sqlite_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner(env={"CONVEYOR_DATABASE_URL": None}).invoke(main, ["install"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "conveyor.db").exists()


# -- installs interlock with Oban's (issue 10, point 10) -------------------------------------------

#: What `oban uninstall` (oban-py) leaves out: Oban's own objects, while Conveyor's remain.
OBAN_OBJECTS = (
    "DROP TABLE IF EXISTS {p}.oban_jobs; DROP TABLE IF EXISTS {p}.oban_leaders; "
    "DROP TABLE IF EXISTS {p}.oban_producers; DROP FUNCTION IF EXISTS {p}.oban_count_estimate(text, text); "
    "DROP TYPE IF EXISTS {p}.oban_job_state"
)


def oban_uninstall(dsn: str, prefix: str) -> None:
    execute(dsn, OBAN_OBJECTS.format(p=f'"{prefix}"'))


async def test_install_recreates_what_oban_uninstall_dropped(
    engine: PostgresEngine, dsn: str, prefix: str
) -> None:
    before = objects_in(dsn, prefix)
    oban_uninstall(dsn, prefix)
    assert migrations(dsn, prefix) == ALL_MIGRATIONS  # Conveyor's record survives
    with pytest.raises(SchemaError) as raised:
        await engine.check_schema()
    message = str(raised.value)
    assert f"the Conveyor schema in {prefix!r} is at version {LATEST} but lacks oban_jobs" in message
    assert "type oban_job_state" in message and "function oban_count_estimate" in message
    assert "run `conveyor install` to recreate them" in message

    assert await engine.install() == LATEST
    assert objects_in(dsn, prefix) == before
    assert migrations(dsn, prefix) == ALL_MIGRATIONS
    await engine.check_schema()
    await engine.insert([JobRequest("tests.Anything", args={})])
    assert count_jobs(dsn, prefix) == 1


async def test_install_recreates_a_dropped_index_and_a_later_migrations_table(
    engine: PostgresEngine, dsn: str, prefix: str
) -> None:
    execute(dsn, f'DROP INDEX "{prefix}".oban_jobs_completed_at_index')
    execute(dsn, f'DROP TABLE "{prefix}".conveyor_queue_states')
    with pytest.raises(SchemaError, match="lacks index oban_jobs_completed_at_index, conveyor_queue_states"):
        await engine.check_schema()
    await engine.install()
    assert "oban_jobs_completed_at_index" in {name for kind, name in objects_in(dsn, prefix)}
    assert tables_in(dsn, prefix) >= TABLES | {"conveyor_queue_states", "conveyor_cron_ticks"}
    await engine.check_schema()


async def test_check_schema_wants_install_on_an_empty_schema(dsn: str, prefix: str) -> None:
    engine = PostgresEngine(dsn, prefix=prefix, max_connections=1)
    await engine.open()
    try:
        with pytest.raises(SchemaError) as raised:
            await engine.check_schema()
        assert str(raised.value) == (
            f"the Conveyor schema in {prefix!r} is not installed: run `conveyor install`"
        )
        assert "None" not in str(raised.value)
    finally:
        await engine.close()


def test_cli_install_after_oban_uninstall_recreates_and_start_works(
    engine: PostgresEngine, dsn: str, prefix: str
) -> None:
    oban_uninstall(dsn, prefix)
    args = ["--dsn", dsn, "--prefix", prefix]
    result = CliRunner().invoke(main, ["install", *args])
    assert result.exit_code == 0, result.output
    assert "already at version" not in result.output
    assert f"schema {prefix!r} repaired at version {LATEST}: recreated oban_jobs" in result.output
    assert tables_in(dsn, prefix) >= TABLES
    result = CliRunner().invoke(main, ["install", *args])
    assert f"schema {prefix!r} already at version {LATEST}" in result.output


async def test_sqlite_install_recreates_dropped_tables(tmp_path: Path) -> None:
    import sqlite3

    from conveyor.engine.sqlite import SqliteEngine
    from conveyor.engine.sqlite import schema as sqlite_schema

    path = str(tmp_path / "jobs.db")
    engine = SqliteEngine(path)
    await engine.open()
    try:
        await engine.install()
        with sqlite3.connect(path) as conn:
            before = set(conn.execute("SELECT type, name FROM sqlite_master").fetchall())
            conn.execute("DROP TABLE oban_jobs")
            conn.execute("DROP TABLE oban_producers")
            conn.execute("DROP TABLE conveyor_cron_ticks")
        with pytest.raises(SchemaError) as raised:
            await engine.check_schema()
        assert f"is at version {sqlite_schema.LATEST_VERSION} but lacks oban_jobs, oban_producers, " in str(
            raised.value
        )
        assert f"run `conveyor install --dsn {engine.url}` to recreate them" in str(raised.value)
        assert await engine.install() == sqlite_schema.LATEST_VERSION
        with sqlite3.connect(path) as conn:
            assert set(conn.execute("SELECT type, name FROM sqlite_master").fetchall()) == before
        await engine.check_schema()
    finally:
        await engine.close()
