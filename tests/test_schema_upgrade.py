"""Upgrading a live schema (issue 32.2): index builds on an existing ``oban_jobs`` never block
inserts, claims or acks, an invalid index left by an interrupted build is built again, DDL that must
lock waits briefly and retries, and ``conveyor migrate --dry-run`` changes nothing."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner

from conveyor import JobRequest, JobState
from conveyor.acks import Ack
from conveyor.cli.main import main
from conveyor.engine._sqlfiles import SqlFiles
from conveyor.engine.postgres import PostgresEngine, migration_runner, schema
from conveyor.engine.postgres.migration_steps import MigrationPlan, Step, StepKind, classify, phased_steps
from tests.helpers import blocked_by, execute, poll

LATEST = schema.LATEST_VERSION
#: Locks on oban_jobs that conflict with the ROW EXCLUSIVE lock of an insert, claim or ack: held or
#: awaited by a migration, they stop the fleet's writes.
BLOCKING_MODES = {"ShareLock", "ShareRowExclusiveLock", "ExclusiveLock", "AccessExclusiveLock"}


def query(dsn: str, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(statement.encode(), params).fetchall()


def downgrade(dsn: str, prefix: str, to: int) -> None:
    """Leave the schema as migration ``to`` left it: drop what the later migrations create."""
    p = f'"{prefix}"'
    later = {
        4: f"DROP INDEX {p}.conveyor_unique_jobs_index",
        5: f"DROP INDEX {p}.conveyor_ordered_lock_index",
        7: f"DROP TABLE {p}.conveyor_queue_starts; DROP TABLE {p}.conveyor_queue_limits",
        # Migration 10 replaced 8's steps index with its unique one.
        8: f"DROP INDEX IF EXISTS {p}.conveyor_workflow_steps_index; "
        f"DROP INDEX {p}.conveyor_workflow_waiting_index",
        9: f"DROP INDEX {p}.conveyor_failed_jobs_index; DROP STATISTICS {p}.conveyor_jobs_state_queue; "
        f"DROP FUNCTION {p}.conveyor_count_estimate(text, text)",
        10: f"DROP INDEX {p}.conveyor_workflow_step_names_index",
    }
    for version, statements in later.items():
        if version > to:
            execute(dsn, statements)
    execute(dsn, f"DELETE FROM {p}.conveyor_migrations WHERE version > %s", (to,))


def index_validity(dsn: str, prefix: str) -> dict[str, bool]:
    rows = query(
        dsn,
        "SELECT c.relname, i.indisvalid FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid "
        "JOIN pg_namespace AS n ON n.oid = c.relnamespace WHERE n.nspname = %s",
        (prefix,),
    )
    return {str(name): bool(valid) for name, valid in rows}


def recorded(dsn: str, prefix: str) -> list[int]:
    return [r[0] for r in query(dsn, f'SELECT version FROM "{prefix}".conveyor_migrations ORDER BY 1')]


async def waiting_build(dsn: str, prefix: str) -> str:
    """The text of the index build of ``prefix`` that waits for a lock, once there is one."""

    def builds() -> list[Any]:
        return query(
            dsn,
            "SELECT query FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query ILIKE %s "
            "AND query ILIKE %s AND pid <> pg_backend_pid()",
            ("%CREATE%INDEX%", f"%{prefix}%"),
        )

    rows = await poll(
        builds, timeout=20, what="an index build of the migration waiting for the open writer", every=0.05
    )
    return str(rows[0][0])


async def installed_engine(prefix: str, dsn: str) -> PostgresEngine:
    engine = PostgresEngine(dsn, prefix=prefix, max_connections=2)
    await engine.open()
    await engine.install()
    return engine


async def test_an_upgrade_builds_indexes_concurrently_while_the_fleet_writes(dsn: str, prefix: str) -> None:
    fleet = await installed_engine(prefix, dsn)
    migrator = PostgresEngine(dsn, prefix=prefix, max_connections=1)
    await migrator.open()
    writer = await psycopg.AsyncConnection.connect(dsn)
    try:
        await fleet.insert([JobRequest("tests.Waiting", queue="q") for _ in range(3)])
        downgrade(dsn, prefix, 3)
        # A write left open: any index build on the table waits for it. A plain CREATE INDEX waits in
        # the lock queue for SHARE, where it stops every later write; a concurrent one does not.
        await writer.execute(f"INSERT INTO \"{prefix}\".oban_jobs (worker) VALUES ('tests.Open')".encode())
        upgrade = asyncio.create_task(migrator.install())
        build = await waiting_build(dsn, prefix)
        assert "CONCURRENTLY" in build
        modes = query(
            dsn, "SELECT mode FROM pg_locks WHERE relation = to_regclass(%s)", (f'"{prefix}".oban_jobs',)
        )
        assert BLOCKING_MODES.isdisjoint(mode for (mode,) in modes), modes

        # Meanwhile the fleet enqueues, claims and acks at once.
        started = time.monotonic()
        await asyncio.wait_for(fleet.insert([JobRequest("tests.During", queue="q")]), 2)
        claimed = await asyncio.wait_for(fleet.fetch_jobs("q", 2, node="n", producer="p"), 2)
        assert len(claimed) == 2
        await asyncio.wait_for(fleet.ack_jobs([Ack(j.id, j.attempt, JobState.COMPLETED) for j in claimed]), 2)
        assert time.monotonic() - started < 2
        assert not upgrade.done()

        await writer.commit()
        assert await asyncio.wait_for(upgrade, 60) == LATEST
    finally:
        await writer.close()
        await migrator.close()
        await fleet.close()
    assert recorded(dsn, prefix) == list(range(1, LATEST + 1))
    validity = index_validity(dsn, prefix)
    for name in ("conveyor_unique_jobs_index", "conveyor_ordered_lock_index", "conveyor_failed_jobs_index"):
        assert validity[name] is True


async def test_an_invalid_index_left_by_an_interrupted_build_is_built_again(dsn: str, prefix: str) -> None:
    engine = await installed_engine(prefix, dsn)
    try:
        await engine.insert([JobRequest("tests.Twin") for _ in range(2)])
        downgrade(dsn, prefix, 8)
        # A concurrent build that failed half way (here: a unique key two rows share) leaves an
        # INVALID index under the name the migration creates.
        with pytest.raises(psycopg.errors.UniqueViolation):
            execute(
                dsn,
                f'CREATE UNIQUE INDEX CONCURRENTLY conveyor_failed_jobs_index ON "{prefix}".oban_jobs ((1))',
            )
        assert index_validity(dsn, prefix)["conveyor_failed_jobs_index"] is False

        assert await engine.install() == LATEST
    finally:
        await engine.close()
    assert index_validity(dsn, prefix)["conveyor_failed_jobs_index"] is True
    definition = query(
        dsn, "SELECT pg_get_indexdef(to_regclass(%s))", (f'"{prefix}".conveyor_failed_jobs_index',)
    )
    assert "UNIQUE" not in definition[0][0] and "WHERE" in definition[0][0]


async def test_racing_upgrades_both_succeed_while_an_index_build_waits(dsn: str, prefix: str) -> None:
    """The second migrator waits for the first without a statement open, which the first one's
    concurrent build would otherwise wait for in turn (a deadlock)."""
    engines = [await installed_engine(prefix, dsn) for _ in range(2)]
    writer = await psycopg.AsyncConnection.connect(dsn)
    try:
        downgrade(dsn, prefix, 3)
        await writer.execute(f"INSERT INTO \"{prefix}\".oban_jobs (worker) VALUES ('tests.Open')".encode())
        first = asyncio.create_task(engines[0].install())
        await waiting_build(dsn, prefix)
        second = asyncio.create_task(engines[1].install())
        await asyncio.sleep(0.3)
        await writer.commit()
        assert await asyncio.wait_for(asyncio.gather(first, second), 60) == [LATEST, LATEST]
    finally:
        await writer.close()
        for engine in engines:
            await engine.close()
    assert recorded(dsn, prefix) == list(range(1, LATEST + 1))
    assert all(index_validity(dsn, prefix).values())


async def test_ddl_that_must_lock_waits_briefly_and_retries(dsn: str, prefix: str) -> None:
    engine = await installed_engine(prefix, dsn)
    reader = await psycopg.AsyncConnection.connect(dsn)
    try:
        # A transaction that read the table holds ACCESS SHARE until it ends, 0.4 s from now.
        await reader.execute(f'SELECT count(*) FROM "{prefix}".oban_jobs'.encode())
        loop = asyncio.get_running_loop()
        loop.call_later(0.4, lambda: asyncio.ensure_future(reader.commit()))
        statement = f'ALTER TABLE "{prefix}".oban_jobs ADD COLUMN IF NOT EXISTS probe integer'
        async with engine.pool.connection() as conn:
            altering = asyncio.create_task(
                migration_runner.run_transaction(conn, statement, lock_timeout_ms=50, retry_for=10)
            )
            await poll(
                lambda: blocked_by(dsn, reader.info.backend_pid), what="the ALTER to wait for the reader"
            )
            # The ALTER gives up its place in the lock queue within 50 ms, so writes keep going.
            started = time.monotonic()
            await asyncio.wait_for(engine.insert([JobRequest("tests.Meanwhile")]), 2)
            assert time.monotonic() - started < 0.3
            attempts = await asyncio.wait_for(altering, 10)
        assert attempts > 1
    finally:
        await reader.close()
        await engine.close()
    columns = query(
        dsn,
        "SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attname = 'probe'",
        (f'"{prefix}".oban_jobs',),
    )
    assert columns == [(1,)]


def test_cli_migrate_dry_run_prints_the_plan_and_changes_nothing(dsn: str, prefix: str) -> None:
    args = ["--dsn", dsn, "--prefix", prefix]
    assert CliRunner().invoke(main, ["install", *args]).exit_code == 0
    downgrade(dsn, prefix, 8)
    execute(dsn, f"INSERT INTO \"{prefix}\".oban_jobs (worker) VALUES ('a'), ('b')")
    with pytest.raises(psycopg.errors.UniqueViolation):
        execute(
            dsn, f'CREATE UNIQUE INDEX CONCURRENTLY conveyor_failed_jobs_index ON "{prefix}".oban_jobs ((1))'
        )
    before = (recorded(dsn, prefix), index_validity(dsn, prefix))

    result = CliRunner().invoke(main, ["migrate", "--dry-run", *args])
    assert result.exit_code == 0, result.output
    headline = f"schema {prefix!r}: version 8 → {LATEST}: would apply {LATEST - 8} migrations (9 job_stats, "
    assert headline in result.output
    assert f'DROP INDEX CONCURRENTLY IF EXISTS "{prefix}".conveyor_failed_jobs_index' in result.output
    assert "CREATE INDEX CONCURRENTLY IF NOT EXISTS conveyor_failed_jobs_index" in result.output
    assert "CREATE STATISTICS" in result.output
    assert (recorded(dsn, prefix), index_validity(dsn, prefix)) == before


def test_cli_migrate_says_it_upgrades(dsn: str, prefix: str) -> None:
    args = ["--dsn", dsn, "--prefix", prefix]
    assert CliRunner().invoke(main, ["install", *args]).exit_code == 0
    downgrade(dsn, prefix, 3)
    result = CliRunner().invoke(main, ["migrate", *args])
    assert result.exit_code == 0, result.output
    assert f"schema {prefix!r}: version 3 → {LATEST}: applying {LATEST - 3} migrations" in result.output
    assert "recreat" not in result.output and "repair" not in result.output
    assert recorded(dsn, prefix) == list(range(1, LATEST + 1))


def test_every_index_on_oban_jobs_is_built_concurrently_in_an_upgrade(prefix: str) -> None:
    """Also a guard for migrations to come: an index on oban_jobs written in a form the runner does
    not recognise (inside a DO block, say) would be built in a transaction, and fails this test."""
    steps = phased_steps(SqlFiles(schema.SQL_PACKAGE, prefix), prefix, 0, schema.STAND_INS)
    built = {step.index for step in steps if step.kind is StepKind.BUILD_INDEX}
    dropped = {step.sql.split(".")[-1].rstrip(";") for step in steps if step.kind is StepKind.DROP_INDEX}
    # An index a later migration replaces (8's steps index, 10's unique one) is built, then dropped.
    assert built - dropped == {name.split("|")[0] for _, kind, name in schema.OBJECTS if kind == "index"}
    in_transactions = "".join(step.sql for step in steps if step.kind is StepKind.TRANSACTION)
    assert not re.search(rf'INDEX[^;]*\bON\s+(ONLY\s+)?"{prefix}"\.oban_jobs\b', in_transactions)
    assert "CONCURRENTLY" not in schema.install_sql(prefix)  # one script, for one transaction

    drop = classify(f'DROP INDEX IF EXISTS "{prefix}".old_index;', prefix, {}, 10)
    assert (drop.kind, drop.sql) == (
        StepKind.DROP_INDEX,
        f'DROP INDEX CONCURRENTLY IF EXISTS "{prefix}".old_index;',
    )
    column = classify(f'ALTER TABLE "{prefix}".oban_jobs ADD COLUMN IF NOT EXISTS x int;', prefix, {}, 10)
    assert column.kind is StepKind.TRANSACTION


async def test_the_steps_run_without_parallel_workers_and_leave_the_session_as_found(
    dsn: str, prefix: str
) -> None:
    """On two cores, the parallel workers of an index build take the cores the fleet's statements
    and commits need (the longest stalls of ``migrate-live``): the steps run in the migrator's own
    process, and the session gets the server's settings back afterwards."""
    engine = await installed_engine(prefix, dsn)
    probe = (
        f'CREATE TABLE "{prefix}".probe AS SELECT '
        "current_setting('max_parallel_maintenance_workers') AS m, "
        "current_setting('max_parallel_workers_per_gather') AS g, current_setting('statement_timeout') AS t"
    )
    plan = MigrationPlan(prefix, LATEST, LATEST, (), False, (Step(LATEST, StepKind.TRANSACTION, probe),), {})
    try:
        async with engine.pool.connection() as conn:
            before = await (await conn.execute("SHOW max_parallel_maintenance_workers")).fetchone()
            await migration_runner.run_plan(conn, plan)
            after = await (await conn.execute("SHOW max_parallel_maintenance_workers")).fetchone()
    finally:
        await engine.close()
    assert query(dsn, f'SELECT m, g, t FROM "{prefix}".probe') == [("0", "0", "0")]
    assert after == before
