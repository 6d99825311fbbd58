"""What only the SQLite engine has, on a temporary file: its schema and constraints, choosing it from a
URL, large inserts and checkpoints, inserts in a caller's sqlite3/aiosqlite/SQLAlchemy transaction,
claims racing across OS processes, notifications between processes, busy locks, and a node running
jobs end to end. Behaviour every engine shares (jobs, hot path, cluster duties, notifications sent by
operations) is proved for SQLite by the conformance suite in tests/conformance/."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiosqlite
import orjson
import pytest
from click.testing import CliRunner
from sqlalchemy import create_engine, text
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
from sqlalchemy.orm import Session

from conveyor import (
    Conveyor,
    JobRequest,
    JobState,
    SchemaError,
    UnsupportedConnectionError,
    ValidationError,
)
from conveyor.acks import Ack
from conveyor.cli.main import main as cli
from conveyor.engine.base import Engine
from conveyor.engine.sqlite import SqliteEngine, schema
from conveyor.engine.sqlite.database import MEMORY
from conveyor.engine.urls import default_database_url, engine_from_url
from tests import helpers, runtime_jobs
from tests.helpers import racing_processes
from tests.sqlite_procs import fetch_all

ROOT = Path(__file__).resolve().parent.parent
WORKER = "tests.sqlite.noop"
CHUNK_PLUS = 5_000 + 500  # more than one insert chunk


# -- fixtures and helpers -------------------------------------------------------------------------
@pytest.fixture
def db_path(tmp_path: Path) -> str:
    return str(tmp_path / "jobs.db")


@pytest.fixture
async def sqlite_engine(db_path: str) -> AsyncIterator[SqliteEngine]:
    engine = SqliteEngine(db_path)
    await engine.open()
    await engine.install()
    yield engine
    await engine.close()


def rows(path: str, where: str = "1", params: Any = ()) -> list[dict[str, Any]]:
    """Rows of oban_jobs read on a fresh connection (so only committed rows count), by id."""
    with sqlite3.connect(path) as conn:
        conn.row_factory = sqlite3.Row
        return [dict(r) for r in conn.execute(f"SELECT * FROM oban_jobs WHERE {where} ORDER BY id", params)]


def count(path: str) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("SELECT count(*) FROM oban_jobs").fetchone()[0])


def execute(path: str, statement: str, params: Any = ()) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute(statement, params)
    finally:
        conn.close()


def request(n: int = 0, **options: Any) -> JobRequest:
    return JobRequest(WORKER, args={"n": n}, **options)


def many(total: int, then: BaseException | None = None, **options: Any) -> Iterator[JobRequest]:
    for n in range(total):
        yield request(n, **options)
    if then is not None:
        raise then


class Heard:
    """A notification handler that records what arrives and when."""

    def __init__(self) -> None:
        self.items: list[tuple[str, dict[str, Any], float]] = []
        self.changed = asyncio.Event()

    def __call__(self, channel: str, payload: dict[str, Any]) -> None:
        self.items.append((channel, payload, time.perf_counter()))
        self.changed.set()

    def on(self, channel: str) -> list[dict[str, Any]]:
        return [payload for name, payload, _ in self.items if name == channel]

    async def wait_for(self, channel: str, n: int = 1, timeout: float = 2.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while len(self.on(channel)) < n and time.monotonic() < deadline:
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                break
        return self.on(channel)


async def claim(engine: SqliteEngine, queue: str = "default", n: int = 1, **kw: Any) -> list[int]:
    return [j.id for j in await engine.fetch_jobs(queue, n, node="node-1", producer="p-1", **kw)]


# -- schema ---------------------------------------------------------------------------------------
async def test_install_twice_then_uninstall(db_path: str) -> None:
    engine = SqliteEngine(db_path)
    await engine.open()
    try:
        assert isinstance(engine, Engine)
        assert await engine.schema_version() is None
        with pytest.raises(SchemaError, match="is not installed: run `conveyor install --dsn sqlite:"):
            await engine.check_schema()
        assert await engine.install() == schema.LATEST_VERSION
        assert await engine.install() == schema.LATEST_VERSION
        assert await engine.schema_version() == schema.LATEST_VERSION
        await engine.check_schema()
        with sqlite3.connect(db_path) as conn:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
            mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
            versions = [r[0] for r in conn.execute("SELECT version FROM conveyor_migrations ORDER BY 1")]
        assert {
            "oban_jobs",
            "oban_leaders",
            "oban_producers",
            "conveyor_migrations",
            "conveyor_notifications",
            "conveyor_cron_ticks",
            "conveyor_queue_states",
        } <= tables
        assert {
            "oban_jobs_state_queue_priority_scheduled_at_id_index",
            "oban_jobs_staging_index",
            "oban_jobs_completed_at_index",
            "oban_jobs_cancelled_at_index",
            "oban_jobs_discarded_at_index",
        } <= indexes
        assert mode == "wal"
        assert versions == list(range(1, schema.LATEST_VERSION + 1))
        await engine.uninstall()
        assert await engine.schema_version() is None
        with sqlite3.connect(db_path) as conn:
            left = [
                r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'")
            ]
        assert left == []
        assert await engine.install() == schema.LATEST_VERSION
    finally:
        await engine.close()


def test_install_sql_is_plain_sqlite_and_runs_twice(tmp_path: Path) -> None:
    script = schema.install_sql()
    with sqlite3.connect(tmp_path / "plain.db") as conn:
        conn.executescript(script)
        conn.executescript(script)
        version = conn.execute("SELECT max(version) FROM conveyor_migrations").fetchone()[0]
        assert version == schema.LATEST_VERSION
        conn.executescript(schema.uninstall_sql())


async def test_check_constraints(sqlite_engine: SqliteEngine, db_path: str) -> None:
    bad = [
        ("state", "'running'"),
        ("queue", "''"),
        ("worker", "''"),
        ("max_attempts", "0"),
        ("priority", "-1"),
        ("attempt", "21"),
    ]
    for column, value in bad:
        with pytest.raises(sqlite3.IntegrityError, match="CHECK"):
            values = {"state": "'available'", "queue": "'q'", "worker": "'w'"} | {column: value}
            names = ", ".join(values)
            execute(db_path, f"INSERT INTO oban_jobs ({names}) VALUES ({', '.join(values.values())})")
    # Defaults fill in the rest, with times in the stored format.
    execute(db_path, "INSERT INTO oban_jobs (worker) VALUES ('w')")
    (row,) = rows(db_path)
    assert (row["state"], row["queue"], row["args"], row["tags"], row["attempt"]) == (
        "available",
        "default",
        "{}",
        "[]",
        0,
    )
    assert len(row["inserted_at"]) == len("2026-01-01 00:00:00.000000")
    found = await sqlite_engine.get_job(row["id"])
    assert found is not None and found.inserted_at.tzinfo is UTC


def test_prefix_other_than_public_is_refused(db_path: str) -> None:
    for build in (
        lambda: SqliteEngine(db_path, prefix="tenant_a"),
        lambda: engine_from_url(f"sqlite:///{db_path}", prefix="tenant_a"),
        lambda: Conveyor(f"sqlite:///{db_path}", prefix="tenant_a"),
        lambda: schema.install_sql("tenant_a"),
    ):
        with pytest.raises(ValidationError) as exc:
            build()
        assert exc.value.field == "prefix"
        assert "SQLite has no schemas" in str(exc.value)


# -- choosing the engine --------------------------------------------------------------------------
def test_engine_from_url_forms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    relative = engine_from_url("sqlite:///data/jobs.db")
    assert isinstance(relative, SqliteEngine) and relative.path == str(tmp_path / "data" / "jobs.db")
    absolute = engine_from_url("sqlite:////var/tmp/abs.db")
    assert isinstance(absolute, SqliteEngine) and absolute.path == "/var/tmp/abs.db"
    for url in ("sqlite://:memory:", "sqlite:///:memory:", "sqlite://"):
        memory = engine_from_url(url)
        assert isinstance(memory, SqliteEngine) and memory.path == MEMORY
    aliased = engine_from_url("sqlite+aiosqlite:///x.db")
    assert isinstance(aliased, SqliteEngine) and aliased.path == str(tmp_path / "x.db")
    default = engine_from_url(None)
    assert isinstance(default, SqliteEngine) and default.path == str(tmp_path / "conveyor.db")
    assert default_database_url() == f"sqlite:///{tmp_path / 'conveyor.db'}"
    for bad in ("sqlite:relative.db", "sqlite://host/x.db", "sqlite:///x.db?mode=ro", "redis://x/y"):
        with pytest.raises(ValidationError) as exc:
            engine_from_url(bad)
        assert exc.value.field == "database_url"


def test_conveyor_without_url_uses_the_default_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CONVEYOR_DATABASE_URL", raising=False)
    monkeypatch.delenv("CONVEYOR_CONFIG", raising=False)
    app = Conveyor()
    try:
        assert app.settings.database_url == f"sqlite:///{tmp_path / 'conveyor.db'}"
        app.install_sync()
        job_id = app.enqueue_sync(request(1))
        found = app.get_job_sync(job_id)
        assert found is not None and found.args == {"n": 1}
    finally:
        app.close_sync()
    assert (tmp_path / "conveyor.db").exists()
    # The environment variable still wins over the default.
    monkeypatch.setenv("CONVEYOR_DATABASE_URL", "sqlite:///other.db")
    assert Conveyor().settings.database_url == "sqlite:///other.db"


def test_cli_install_on_sqlite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CONVEYOR_DATABASE_URL", raising=False)
    runner = CliRunner()
    first = runner.invoke(cli, ["install"])
    assert first.exit_code == 0, first.output
    assert f"installed at version {schema.LATEST_VERSION}" in first.output
    assert (tmp_path / "conveyor.db").exists()
    again = runner.invoke(cli, ["install", "--dsn", "sqlite:///conveyor.db"])
    assert again.exit_code == 0 and f"already at version {schema.LATEST_VERSION}" in again.output
    printed = runner.invoke(cli, ["install", "--print-sql", "--dsn", "sqlite:///x.db"])
    assert printed.exit_code == 0
    assert "AUTOINCREMENT" in printed.output and "CREATE SCHEMA" not in printed.output
    assert not (tmp_path / "x.db").exists()
    postgres = runner.invoke(cli, ["install", "--print-sql", "--dsn", "postgresql://localhost/app"])
    assert postgres.exit_code == 0 and "CREATE SCHEMA" in postgres.output
    gone = runner.invoke(cli, ["uninstall", "--yes"])
    assert gone.exit_code == 0
    with sqlite3.connect(tmp_path / "conveyor.db") as conn:
        assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'oban_jobs'").fetchone()[0] == 0


async def test_memory_database_is_shared_by_the_engines_of_a_process() -> None:
    first, second = SqliteEngine(MEMORY), SqliteEngine(MEMORY)
    await first.open()
    await second.open()
    try:
        await first.install()
        heard = Heard()
        listener = await second.listen(["insert"], heard)
        (job_id,) = await first.insert([request(1)])
        assert await heard.wait_for("insert") == [{"queue": "default"}]
        assert await claim(second) == [job_id]
        await listener.stop()
    finally:
        await first.close()
        await second.close()


# -- inserting ------------------------------------------------------------------------------------
async def test_insert_100k_jobs_in_order(sqlite_engine: SqliteEngine, db_path: str) -> None:
    total = 100_000
    (before,) = await sqlite_engine.insert([request(-1)])
    started = time.perf_counter()
    ids = await sqlite_engine.insert(many(total))
    elapsed = time.perf_counter() - started
    assert len(ids) == total
    assert ids == list(range(before + 1, before + 1 + total))
    assert count(db_path) == total + 1
    with sqlite3.connect(db_path) as conn:
        args = conn.execute("SELECT args FROM oban_jobs WHERE id IN (?, ?)", (ids[0], ids[-1])).fetchall()
    assert [orjson.loads(a[0]) for a in args] == [{"n": 0}, {"n": total - 1}]
    print(f"inserted {total} jobs in {elapsed:.2f}s ({total / elapsed:,.0f} jobs/s)")


def checkpointed_size(db_path: str, at_least: int, timeout: float = 5.0) -> int:
    """The database file's size once the engine has copied the log into it (``at_least`` bytes),
    or whatever it is after ``timeout``; then the log must hold nothing left to copy. Only the
    size is watched until then: a checkpoint of our own would do the engine's work for it."""
    deadline = time.monotonic() + timeout
    size = helpers.poll_sync(
        lambda: os.path.getsize(db_path),
        lambda size: size >= at_least,
        timeout=timeout,
        what=f"the database file to reach {at_least} bytes",
    )
    with sqlite3.connect(db_path) as conn:
        # A checkpoint of the engine's may still be running: "busy", ask again.
        helpers.poll_sync(
            lambda: conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone(),
            lambda found: found[0] == 0 and found[2] == found[1],  # not busy, every frame copied
            timeout=max(0.0, deadline - time.monotonic()),
            what="(busy, log frames, copied) with nothing left to copy",
        )
    return size


async def test_the_log_is_copied_into_the_database_file_off_the_writer(
    sqlite_engine: SqliteEngine, db_path: str
) -> None:
    # The writer never checkpoints inside its commits; the checkpointer's thread does it after them.
    autocheckpoint = await sqlite_engine.database.write(
        lambda tx: tx.conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0]
    )
    assert autocheckpoint == 0
    before = await asyncio.to_thread(os.path.getsize, db_path)
    await sqlite_engine.insert(many(20_000))
    expected = before + 2_000_000
    assert await asyncio.to_thread(checkpointed_size, db_path, expected) >= expected


# -- inserting in the caller's transaction --------------------------------------------------------
def notes_table(path: str) -> None:
    execute(path, "CREATE TABLE notes (note TEXT NOT NULL)")


def notes(path: str) -> list[str]:
    with sqlite3.connect(path) as conn:
        return [r[0] for r in conn.execute("SELECT note FROM notes ORDER BY note")]


async def heard_marker(db_path: str, heard: Heard) -> None:
    """Write a "signal" notification row as another process would (committed at once, no source)
    and wait until ``heard`` has it: the rows are delivered in order, so a notification committed
    before it has been delivered by then, and one not delivered by then was never committed."""
    with sqlite3.connect(db_path) as conn:  # commits on leaving the block
        conn.execute(
            "INSERT INTO conveyor_notifications (channel, payload, source, created_at)"
            " VALUES (?, ?, NULL, ?)",
            ("signal", orjson.dumps({"marker": db_path}).decode(), datetime.now(UTC).isoformat(" ")),
        )
    await helpers.poll(lambda: {"marker": db_path} in heard.on("signal"), what="the marker notification")


async def test_sqlite3_connection_commit_and_rollback(sqlite_engine: SqliteEngine, db_path: str) -> None:
    notes_table(db_path)
    heard = Heard()
    listener = await sqlite_engine.listen(["insert", "signal"], heard)
    try:
        conn = sqlite3.connect(db_path)  # the default: transactions open implicitly
        conn.execute("INSERT INTO notes VALUES ('rolled back')")
        sqlite_engine.insert_sync([request(1, queue="txn")], conn=conn)
        conn.rollback()
        await heard_marker(db_path, heard)
        assert heard.on("insert") == [] and count(db_path) == 0 and notes(db_path) == []

        conn.execute("INSERT INTO notes VALUES ('committed')")
        ids = sqlite_engine.insert_sync(many(CHUNK_PLUS, queue="txn"), conn=conn)
        assert len(ids) == CHUNK_PLUS and count(db_path) == 0  # not visible before the commit
        await helpers.holds(
            lambda: heard.on("insert"), lambda on: on == [], during=0.1, what="uncommitted, announced"
        )
        conn.commit()
        assert await heard.wait_for("insert") == [{"queue": "txn"}]
        assert count(db_path) == CHUNK_PLUS and notes(db_path) == ["committed"]

        # No transaction open and nothing written yet: the insert opens one; the caller commits.
        (job_id,) = sqlite_engine.insert_sync([request(2)], conn=conn)
        assert conn.in_transaction and count(db_path) == CHUNK_PLUS
        conn.commit()
        assert await sqlite_engine.get_job(job_id) is not None
        conn.close()

        # An autocommit connection outside a transaction: committed at once, as each statement is.
        auto = sqlite3.connect(db_path, isolation_level=None)
        sqlite_engine.insert_sync(many(CHUNK_PLUS), conn=auto)
        assert not auto.in_transaction and count(db_path) == 2 * CHUNK_PLUS + 1
        auto.close()
    finally:
        await listener.stop()


async def test_a_lone_unique_insert_on_a_callers_sqlite3_connection(
    sqlite_engine: SqliteEngine, db_path: str
) -> None:
    """One unique request through a caller's ``sqlite3`` connection takes the single-insert path
    (its insert claims the key): a twin in the same transaction meets it, a rollback frees the key,
    and a committed one blocks the engine's own inserts."""
    conn = sqlite3.connect(db_path)
    once = {"period": None}
    (first,) = sqlite_engine.insert_sync([request(1, unique=once)], conn=conn)
    (twin,) = sqlite_engine.insert_sync([request(1, unique=once)], conn=conn)
    assert twin == first and twin.conflict  # type: ignore[attr-defined]
    conn.rollback()
    assert count(db_path) == 0
    (kept,) = sqlite_engine.insert_sync([request(1, unique=once)], conn=conn)
    assert not getattr(kept, "conflict", False)
    conn.commit()
    conn.close()
    (again,) = await sqlite_engine.insert([request(1, unique=once)])
    assert again == kept and again.conflict  # type: ignore[attr-defined]
    assert count(db_path) == 1


async def test_failed_insert_keeps_the_callers_transaction_usable(
    sqlite_engine: SqliteEngine, db_path: str
) -> None:
    notes_table(db_path)
    conn = sqlite3.connect(db_path)
    conn.execute("INSERT INTO notes VALUES ('before')")
    kept = sqlite_engine.insert_sync([request(-1)], conn=conn)
    with pytest.raises(RuntimeError, match="source failed"):
        sqlite_engine.insert_sync(many(2 * 5_000 + 10, RuntimeError("source failed")), conn=conn)
    assert conn.in_transaction
    conn.execute("INSERT INTO notes VALUES ('after')")
    conn.commit()
    conn.close()
    assert notes(db_path) == ["after", "before"]
    assert [r["id"] for r in rows(db_path)] == kept

    auto = sqlite3.connect(db_path, isolation_level=None)
    with pytest.raises(RuntimeError, match="source failed"):
        sqlite_engine.insert_sync(many(5_000 + 10, RuntimeError("source failed")), conn=auto)
    assert not auto.in_transaction
    auto.close()
    assert count(db_path) == 1


@pytest.mark.parametrize("kind", ["session", "connection"])
async def test_sqlalchemy_sync_commit_and_rollback(
    sqlite_engine: SqliteEngine, db_path: str, kind: str
) -> None:
    notes_table(db_path)
    alchemy = create_engine(f"sqlite:///{db_path}")
    heard = Heard()
    listener = await sqlite_engine.listen(["insert", "signal"], heard)
    try:
        with Session(alchemy) if kind == "session" else alchemy.connect() as conn:
            conn.execute(text("INSERT INTO notes VALUES ('rolled back')"))
            sqlite_engine.insert_sync([request(1, queue="txn")], conn=conn)
            conn.rollback()
        await heard_marker(db_path, heard)
        assert count(db_path) == 0 and heard.on("insert") == []

        with Session(alchemy) if kind == "session" else alchemy.connect() as conn:
            conn.execute(text("INSERT INTO notes VALUES ('committed')"))
            ids = sqlite_engine.insert_sync([request(2, queue="txn"), request(3, queue="txn")], conn=conn)
            assert count(db_path) == 0
            conn.commit()
        assert await heard.wait_for("insert") == [{"queue": "txn"}]
        assert [r["id"] for r in rows(db_path)] == ids and notes(db_path) == ["committed"]
    finally:
        await listener.stop()
        alchemy.dispose()


async def test_aiosqlite_commit_and_rollback(sqlite_engine: SqliteEngine, db_path: str) -> None:
    notes_table(db_path)
    async with aiosqlite.connect(db_path) as conn:
        await conn.execute("INSERT INTO notes VALUES ('rolled back')")
        await sqlite_engine.insert([request(1)], conn=conn)
        await conn.rollback()
        assert count(db_path) == 0
        await conn.execute("INSERT INTO notes VALUES ('committed')")
        ids = await sqlite_engine.insert(many(CHUNK_PLUS), conn=conn)
        assert count(db_path) == 0
        await conn.commit()
    assert count(db_path) == CHUNK_PLUS and [r["id"] for r in rows(db_path)] == ids
    assert notes(db_path) == ["committed"]


@pytest.mark.parametrize("kind", ["session", "connection"])
async def test_sqlalchemy_async_commit_and_rollback(
    sqlite_engine: SqliteEngine, db_path: str, kind: str
) -> None:
    notes_table(db_path)
    alchemy = create_async_engine(f"sqlite+aiosqlite:///{db_path}")

    async def open_conn() -> Any:
        return AsyncSession(alchemy) if kind == "session" else alchemy.connect()

    try:
        async with await open_conn() as conn:
            await conn.execute(text("INSERT INTO notes VALUES ('rolled back')"))
            await sqlite_engine.insert([request(1)], conn=conn)
            await conn.rollback()
        assert count(db_path) == 0
        async with await open_conn() as conn:
            await conn.execute(text("INSERT INTO notes VALUES ('committed')"))
            ids = await sqlite_engine.insert([request(2), request(3)], conn=conn)
            assert count(db_path) == 0
            await conn.commit()
        assert [r["id"] for r in rows(db_path)] == ids and notes(db_path) == ["committed"]
    finally:
        await alchemy.dispose()


async def test_an_enqueue_that_opens_a_sqlalchemy_connections_transaction_is_committed_with_it(
    sqlite_engine: SqliteEngine, db_path: str
) -> None:
    """Our insert as a SQLAlchemy Connection's first statement: the caller's commit() commits it."""
    blocking = create_engine(f"sqlite:///{db_path}")
    alchemy = create_async_engine(f"sqlite+aiosqlite:///{db_path}")
    try:
        with blocking.connect() as conn:
            sqlite_engine.insert_sync([request(1)], conn=conn)
            conn.commit()
        async with alchemy.connect() as aconn:
            await sqlite_engine.insert([request(2)], conn=aconn)
            await aconn.commit()
        async with alchemy.connect() as aconn:
            await sqlite_engine.insert([request(3)], conn=aconn)
            await aconn.rollback()
        assert count(db_path) == 2
    finally:
        blocking.dispose()
        await alchemy.dispose()


async def test_unsupported_connections_are_refused(sqlite_engine: SqliteEngine, db_path: str) -> None:
    for bad in (object(), f"sqlite:///{db_path}", 42):
        with pytest.raises(UnsupportedConnectionError) as exc:
            await sqlite_engine.insert([request(1)], conn=bad)
        assert exc.value.connection is bad
        with pytest.raises(UnsupportedConnectionError):
            sqlite_engine.insert_sync([request(1)], conn=bad)
    blocking = sqlite3.connect(db_path)
    with pytest.raises(UnsupportedConnectionError, match="aiosqlite"):
        await sqlite_engine.insert([request(1)], conn=blocking)
    blocking.close()
    async with aiosqlite.connect(db_path) as nonblocking:
        with pytest.raises(UnsupportedConnectionError, match=r"sqlite3\.Connection"):
            sqlite_engine.insert_sync([request(1)], conn=nonblocking)
    alchemy = create_engine(f"sqlite:///{db_path}")
    with Session(alchemy) as session, pytest.raises(UnsupportedConnectionError):
        await sqlite_engine.insert([request(1)], conn=session)
    alchemy.dispose()
    assert count(db_path) == 0


# -- the hot path across processes ---------------------------------------------------------------
async def test_two_processes_never_claim_the_same_job(sqlite_engine: SqliteEngine, db_path: str) -> None:
    total = 5_000
    await sqlite_engine.insert(many(total, queue="race"))
    context = racing_processes()
    go = context.Event()
    results, ready = context.Queue(), context.Queue()
    workers = [
        context.Process(target=fetch_all, args=(db_path, "race", 7, go, results, ready), daemon=True)
        for _ in range(2)
    ]
    for worker in workers:
        worker.start()
    for _ in workers:  # both imported and opened before the race starts (a fixed pause was too short
        await asyncio.to_thread(ready.get, True, 60)  # for a spawned process on a loaded machine)
    go.set()
    claimed_here = []
    while True:  # this process races too
        batch = await claim(sqlite_engine, "race", 5)
        if not batch:
            break
        claimed_here += batch
    per_process = [await asyncio.to_thread(results.get, True, 60) for _ in workers]
    for worker in workers:
        worker.join(10)
    claimed = claimed_here + [i for ids in per_process for i in ids]
    assert len(claimed) == total
    assert len(set(claimed)) == total
    assert all(per_process), [len(p) for p in per_process]  # both processes took part
    assert {r["state"] for r in rows(db_path)} == {"executing"}
    assert {r["attempt"] for r in rows(db_path)} == {1}


# -- notifications --------------------------------------------------------------------------------
async def test_notifications_in_process_are_immediate(sqlite_engine: SqliteEngine, db_path: str) -> None:
    other = SqliteEngine(db_path)  # another engine of this process on the same file
    await other.open()
    heard = Heard()
    listener = await other.listen(["signal", "insert"], heard)
    try:
        for n in range(20):
            await sqlite_engine.notify("signal", {"n": n})
            # Handed over on this loop before notify() even returns: no polling in between.
            assert heard.on("signal")[-1:] == [{"n": n}]
        assert [p["n"] for p in heard.on("signal")] == list(range(20))
        await sqlite_engine.notify("leader", {"ignored": True})  # not a channel we listen on
        # Delivered in order: once a later notification is heard, the ignored one would have been.
        await sqlite_engine.notify("signal", {"n": "marker"})
        await helpers.poll(lambda: heard.on("signal")[-1:] == [{"n": "marker"}], what="the marker")
        assert {name for name, *_ in heard.items} == {"listener", "signal"}
    finally:
        await listener.stop()
        await other.close()
    # A listener still subscribed hears the next notification; the stopped one never does.
    still = Heard()
    witness = await sqlite_engine.listen(["signal"], still)
    try:
        await sqlite_engine.notify("signal", {"after": "stop"})
        await helpers.poll(lambda: {"after": "stop"} in still.on("signal"), what="the witness to hear it")
    finally:
        await witness.stop()
    assert {"after": "stop"} not in heard.on("signal")


async def test_notifications_across_processes(sqlite_engine: SqliteEngine, db_path: str) -> None:
    heard = Heard()
    listener = await sqlite_engine.listen(["signal"], heard)
    child = subprocess.Popen(  # noqa: ASYNC220 - a long-lived child we talk to through pipes
        [sys.executable, "-m", "tests.sqlite_procs", db_path, "signal"],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdin is not None and child.stdout is not None
        assert await asyncio.to_thread(child.stdout.readline) == "ready\n"
        delays = []
        for n in range(5):
            child.stdin.write(f"hello-{n}\n")
            child.stdin.flush()
            line = await asyncio.to_thread(child.stdout.readline)
            sent = float(line.split()[1])
            got = await heard.wait_for("signal", n + 1, timeout=2.0)
            assert got[-1]["text"] == f"hello-{n}"
            delays.append(time.time() - sent)
        assert max(delays) < 0.2, delays
        child.stdin.write("\n")
        child.stdin.flush()
        assert child.wait(10) == 0
    finally:
        if child.poll() is None:
            child.kill()
        await listener.stop()


async def test_caller_transaction_notifications_reach_this_process(
    sqlite_engine: SqliteEngine, db_path: str
) -> None:
    heard = Heard()
    listener = await sqlite_engine.listen(["insert"], heard)
    try:
        with sqlite3.connect(db_path) as conn:  # commits on leaving the block
            sqlite_engine.insert_sync([request(1, queue="callers")], conn=conn)
        assert await heard.wait_for("insert", timeout=1.0) == [{"queue": "callers"}]
    finally:
        await listener.stop()


async def test_old_notification_rows_are_pruned(
    sqlite_engine: SqliteEngine, db_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from conveyor.engine.sqlite import database

    now = [time.monotonic()]  # the rows' age, moved by the test instead of waited for
    monkeypatch.setattr(database, "prune_clock", lambda: now[0])
    monkeypatch.setattr(database, "PRUNE_INTERVAL", 0.0)
    monkeypatch.setattr(database, "NOTIFICATION_RETENTION", 0.05)
    for n in range(5):
        await sqlite_engine.notify("signal", {"n": n})
    now[0] += 0.1
    await sqlite_engine.notify("signal", {"n": 5})
    now[0] += 0.1
    await sqlite_engine.notify("signal", {"n": 6})
    with sqlite3.connect(db_path) as conn:
        left = [orjson.loads(r[0])["n"] for r in conn.execute("SELECT payload FROM conveyor_notifications")]
    assert left and 0 not in left and 6 in left


# -- busy locks -----------------------------------------------------------------------------------
async def test_a_write_lock_held_elsewhere_makes_fetch_wait_not_fail(
    sqlite_engine: SqliteEngine, db_path: str
) -> None:
    ids = await sqlite_engine.insert([request(n) for n in range(3)])
    locked, release = threading.Event(), threading.Event()

    def hold_lock() -> None:
        conn = sqlite3.connect(db_path, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("UPDATE oban_jobs SET priority = 0")
        locked.set()
        release.wait(5)
        time.sleep(0.5)
        conn.execute("COMMIT")
        conn.close()

    holder = threading.Thread(target=hold_lock)
    holder.start()
    try:
        assert locked.wait(5)
        release.set()
        started = time.monotonic()
        claimed = await claim(sqlite_engine, n=3)
        waited = time.monotonic() - started
        assert claimed == ids
        assert waited > 0.3, waited
        assert await sqlite_engine.ack_jobs([Ack(i, 1, JobState.COMPLETED) for i in ids]) == ids
    finally:
        release.set()
        holder.join()


async def test_busy_timeout_bounds_the_wait(db_path: str) -> None:
    engine = SqliteEngine(db_path, busy_timeout=0.2)
    await engine.open()
    await engine.install()
    conn = sqlite3.connect(db_path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            await engine.fetch_jobs("default", 1, node="n", producer="p")
    finally:
        conn.execute("ROLLBACK")
        conn.close()
        await engine.close()


# -- end to end -----------------------------------------------------------------------------------
async def test_process_workers_stop_when_the_schema_check_fails(tmp_path: Path) -> None:
    """The app starts the pool's workers before it checks the schema; a failed check stops them."""
    app = Conveyor(
        database_url=f"sqlite:///{tmp_path}/jobs.db",
        queues={"cpu": {"limit": 2, "executor": "process"}},
        processes=2,
    )
    await helpers.assert_failed_start_leaves_no_workers(app)


async def test_a_node_runs_async_thread_and_process_jobs(tmp_path: Path) -> None:
    app = Conveyor(
        database_url=f"sqlite:///{tmp_path}/jobs.db",
        queues={"default": 10, "cpu": {"limit": 2, "executor": "process"}},
        poll_interval=0.5,
        stage_interval=0.1,
        processes=1,
        shutdown_grace=5.0,
    )
    await app.install()
    async with app:
        ids = await app.enqueue_many(
            [
                runtime_jobs.add.new(a=1, b=2),
                runtime_jobs.multiply_in_thread.new(a=3, b=4),
                runtime_jobs.context_process.new().with_options(queue="cpu"),
                runtime_jobs.add.new(a=5, b=6).with_options(schedule_in=0.3),
                runtime_jobs.fail.new(message="nope"),
            ]
        )

        async def all_jobs() -> list[Any]:
            return [await app.get_job(i) for i in ids]

        jobs = await helpers.poll(
            all_jobs,
            lambda found: all(
                j is not None and j.state in (JobState.COMPLETED, JobState.RETRYABLE) for j in found
            ),
            timeout=30,
            what="every job run",
            every=0.05,
        )
        assert [j.state if j is not None else None for j in jobs] == [
            JobState.COMPLETED,
            JobState.COMPLETED,
            JobState.COMPLETED,
            JobState.COMPLETED,
            JobState.RETRYABLE,
        ]
        assert await app.get_result(ids[0]) == 3
        assert (await app.get_result(ids[1]))["product"] == 12
        assert (await app.get_result(ids[2]))["pid"] != os.getpid()
        assert await app.get_result(ids[3]) == 11
        failed = await app.get_job(ids[4])
        assert failed is not None and "nope" in failed.errors[0]["error"]


async def test_insert_to_start_latency_through_a_node(tmp_path: Path) -> None:
    key = uuid.uuid4().hex
    app = Conveyor(database_url=f"sqlite:///{tmp_path}/jobs.db", queues={"default": 10}, poll_interval=5.0)
    await app.install()
    fetches = helpers.Events()
    app.on("producer.fetch", fetches)
    async with app:
        await fetches.wait("producer.fetch")  # the first poll, at start, is over: the next is 5 s away
        latencies = []
        for _ in range(20):
            started = time.monotonic()
            await app.enqueue(runtime_jobs.mark_started.new(key=key))
            await helpers.poll(
                lambda: runtime_jobs.EVENTS.get(key, 0.0),
                lambda seen, started=started: seen >= started,
                timeout=5,
                what="the job to start",
                every=0.0005,
            )
            latencies.append(runtime_jobs.EVENTS[key] - started)
        # Woken by the in-process notification, not by the 5 s poll.
        assert sorted(latencies)[10] < 0.05, latencies


async def test_an_ack_given_a_node_reads_past_an_attempted_by_that_is_not_json(
    sqlite_engine: SqliteEngine, db_path: str
) -> None:
    # Another writer's junk claim is nobody's: a node's ack skips it (and writes the rest of its
    # batch); an ack without a node still applies.
    ids = await sqlite_engine.insert([JobRequest(worker="w"), JobRequest(worker="w")])
    jobs = await sqlite_engine.fetch_jobs("default", 2, node="n-1", producer="p-1")
    assert sorted(j.id for j in jobs) == sorted(ids)
    execute(db_path, "UPDATE oban_jobs SET attempted_by = 'not json' WHERE id = ?", (ids[0],))
    acks = [Ack(job_id, 1, JobState.COMPLETED) for job_id in ids]
    assert await sqlite_engine.ack_jobs(acks, node="n-1") == [ids[1]]
    assert await sqlite_engine.ack_jobs(acks) == [ids[0]]


async def test_still_executing_reads_past_an_attempted_by_that_is_not_json(
    sqlite_engine: SqliteEngine, db_path: str
) -> None:
    # Another writer's junk in one claim must not fail the heartbeat's question for every job.
    ids = await sqlite_engine.insert([JobRequest(worker="w"), JobRequest(worker="w")])
    assert sorted(await claim(sqlite_engine, n=2)) == sorted(ids)
    execute(db_path, "UPDATE oban_jobs SET attempted_by = 'not json' WHERE id = ?", (ids[0],))
    attempts = [(job_id, 1) for job_id in ids]
    assert await sqlite_engine.still_executing(attempts, producers=["p-1"]) == {ids[1]}
    assert await sqlite_engine.still_executing(attempts) == set(ids)
