"""The engine conformance suite: every engine proves the same behaviour through the Engine API.

A new engine joins by adding a factory to ENGINES; no test below may use engine-specific SQL.
A factory gets the test's tmp_path and a list it may note created databases in (to be cleaned up);
called again with the same list it returns another engine on the same database (several nodes).
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractContextManager, asynccontextmanager, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiosqlite
import psycopg
import pytest

from conveyor import Conveyor
from conveyor.engine.base import Engine
from conveyor.engine.postgres import PostgresEngine
from conveyor.engine.sqlite import SqliteEngine
from tests.conformance import mariadb
from tests.conftest import DSN

#: PostgreSQL schemas a finished test left installed and empty, for the next test to take: emptying
#: five small tables costs a fraction of dropping a schema and running the migrations again.
_spare_schemas: list[str] = []
_RECYCLED_TABLES = (
    "oban_jobs",
    "oban_producers",
    "oban_leaders",
    "conveyor_cron_ticks",
    "conveyor_queue_states",
    "conveyor_queue_starts",
    "conveyor_queue_limits",
    "oban_crons",
    "oban_queues",
)


def _postgres(tmp_path: Path, schemas: list[str]) -> Engine:
    if not schemas:
        schemas.append(_spare_schemas.pop() if _spare_schemas else f"conveyor_conf_{uuid.uuid4().hex[:10]}")
    return PostgresEngine(DSN, prefix=schemas[0], max_connections=4)


#: The connection that empties (or drops) released schemas, kept for the process: a new one for
#: each of a thousand cases cost the server a backend's start and exit every time.
_admin: list[psycopg.Connection[Any]] = []


def _admin_connection() -> psycopg.Connection[Any]:
    if _admin and _admin[0].closed:
        _admin.clear()
    if not _admin:
        _admin.append(psycopg.connect(DSN, autocommit=True))
    return _admin[0]


def release_schema(schema: str) -> None:
    """Empty a test's schema for the next one, or drop it when it is not intact (uninstalled); a
    MariaDB test's private database (tagged ``mariadb:``) likewise (``mariadb.release``)."""
    if mariadb.release(schema, keep=True):
        return
    conn = _admin_connection()
    try:
        with conn.transaction():
            for table in _RECYCLED_TABLES:
                conn.execute(f'DELETE FROM "{schema}"."{table}"'.encode())
    except psycopg.OperationalError:
        conn.close()  # the next release connects again
        raise
    except psycopg.Error:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'.encode())
    else:
        _spare_schemas.append(schema)


@pytest.fixture(scope="session", autouse=True)
def _drop_spare_schemas() -> Iterator[None]:
    yield
    if mariadb.UNREACHABLE is None:
        mariadb.drop_spares()
    conn = _admin_connection()
    while _spare_schemas:
        conn.execute(f'DROP SCHEMA IF EXISTS "{_spare_schemas.pop()}" CASCADE'.encode())
    conn.close()


def _sqlite(tmp_path: Path, schemas: list[str]) -> Engine:
    return SqliteEngine(tmp_path / "conformance.db")


def _mariadb(tmp_path: Path, schemas: list[str]) -> Engine:
    return mariadb.factory(schemas, spare=True)


ENGINES: dict[str, Callable[[Path, list[str]], Engine]] = {
    "postgres": _postgres,
    "sqlite": _sqlite,
    "mariadb": _mariadb,
}

#: What the MariaDB engine does not do yet, keyed by test module (every case of it) or
#: ``module::test`` (one test), each with the reason: those cases are skipped on mariadb, never
#: failed. Empty since every role landed; an engine growing a role adds its waiting cases here
#: (docs/mysql.md keeps the same list) and ``CONVEYOR_MARIADB_PENDING=run`` runs them anyway.
MARIADB_PENDING: dict[str, str] = {}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Skip the mariadb cases when no server answers, and those MARIADB_PENDING names."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is None or callspec.params.get("engine_name") != "mariadb":
            continue
        if mariadb.UNREACHABLE is not None:
            item.add_marker(pytest.mark.skip(reason=mariadb.UNREACHABLE))
            continue
        module = item.nodeid.split("tests/conformance/", 1)[-1].split("::", 1)[0]
        name = getattr(item, "originalname", item.name)
        reason = MARIADB_PENDING.get(f"{module}::{name}") or MARIADB_PENDING.get(module)
        if reason is not None and os.environ.get("CONVEYOR_MARIADB_PENDING") != "run":
            item.add_marker(pytest.mark.skip(reason=f"MariaDB engine pending: {reason}"))


async def _postgres_caller(engine: Engine) -> Any:
    return await psycopg.AsyncConnection.connect(DSN)


async def _sqlite_caller(engine: Engine) -> Any:
    assert isinstance(engine, SqliteEngine)
    return await aiosqlite.connect(engine.path)


def _postgres_address(engine: Engine) -> tuple[str, str]:
    assert isinstance(engine, PostgresEngine)
    return engine.dsn, engine.prefix


def _sqlite_address(engine: Engine) -> tuple[str, str]:
    assert isinstance(engine, SqliteEngine)
    return engine.url, "public"


#: For each engine, the (URL, prefix) that ``engine_from_url`` turns into another engine on the same
#: database: how a test reaches it from other processes.
ADDRESSES: dict[str, Callable[[Engine], tuple[str, str]]] = {
    "postgres": _postgres_address,
    "sqlite": _sqlite_address,
    "mariadb": mariadb.address,
}


async def _postgres_unstamp(engine: Engine, job_id: int, scheduled_at: datetime) -> None:
    assert isinstance(engine, PostgresEngine)
    async with await psycopg.AsyncConnection.connect(DSN, autocommit=True) as conn:
        table = f'"{engine.prefix}".oban_jobs'
        statement = f"UPDATE {table} SET attempted_at = NULL, scheduled_at = %s WHERE id = %s"
        await conn.execute(statement.encode(), (scheduled_at.astimezone(UTC).replace(tzinfo=None), job_id))


async def _sqlite_unstamp(engine: Engine, job_id: int, scheduled_at: datetime) -> None:
    assert isinstance(engine, SqliteEngine)
    naive = scheduled_at.astimezone(UTC).replace(tzinfo=None).isoformat(" ", timespec="microseconds")
    async with aiosqlite.connect(engine.path) as conn:
        await conn.execute(
            "UPDATE oban_jobs SET attempted_at = NULL, scheduled_at = ? WHERE id = ?", (naive, job_id)
        )
        await conn.commit()


#: For each engine, what another client may write that the Engine API never does: an executing row
#: without ``attempted_at`` (and ``scheduled_at`` set as given), written on a connection of its own.
UNSTAMP_ATTEMPT: dict[str, Callable[[Engine, int, datetime], Awaitable[None]]] = {
    "postgres": _postgres_unstamp,
    "sqlite": _sqlite_unstamp,
    "mariadb": mariadb.unstamp,
}

#: The JSON columns another client may fill with JSON of a shape the Engine API never writes.
JSON_COLUMNS = ("args", "meta")


async def _postgres_rewrite(engine: Engine, job_id: int, column: str, text: str) -> None:
    assert isinstance(engine, PostgresEngine) and column in JSON_COLUMNS
    async with await psycopg.AsyncConnection.connect(DSN, autocommit=True) as conn:
        statement = f'UPDATE "{engine.prefix}".oban_jobs SET {column} = %s::jsonb WHERE id = %s'
        await conn.execute(statement.encode(), (text, job_id))


async def _sqlite_rewrite(engine: Engine, job_id: int, column: str, text: str) -> None:
    assert isinstance(engine, SqliteEngine) and column in JSON_COLUMNS
    async with aiosqlite.connect(engine.path) as conn:
        await conn.execute(f"UPDATE oban_jobs SET {column} = ? WHERE id = ?", (text, job_id))
        await conn.commit()


#: For each engine: write ``text`` (valid JSON, of any shape) into the args or meta of a job, on a
#: connection of its own, as another client may.
REWRITE_JSON: dict[str, Callable[[Engine, int, str, str], Awaitable[None]]] = {
    "postgres": _postgres_rewrite,
    "sqlite": _sqlite_rewrite,
    "mariadb": mariadb.rewrite,
}


#: For each engine, an application's own async connection to the engine's database (what ``conn=``
#: takes), opened with the driver's defaults: transactions begin implicitly, ``commit()`` ends them.
CALLER_CONNECTIONS: dict[str, Callable[[Engine], Awaitable[Any]]] = {
    "postgres": _postgres_caller,
    "sqlite": _sqlite_caller,
    "mariadb": mariadb.caller,
}


@contextmanager
def _postgres_blocking_caller(engine: Engine) -> Iterator[Any]:
    assert isinstance(engine, PostgresEngine)
    with psycopg.connect(engine.dsn) as conn:  # commits on the way out
        yield conn


@contextmanager
def _sqlite_blocking_caller(engine: Engine) -> Iterator[Any]:
    assert isinstance(engine, SqliteEngine)
    conn = sqlite3.connect(engine.path)
    try:
        yield conn
        conn.commit()
    finally:
        conn.close()


#: For each engine, an application's own blocking connection to the engine's database (what
#: ``conn=`` of the ``_sync`` calls takes), committed on the way out.
BLOCKING_CALLER_CONNECTIONS: dict[str, Callable[[Engine], AbstractContextManager[Any]]] = {
    "postgres": _postgres_blocking_caller,
    "sqlite": _sqlite_blocking_caller,
    "mariadb": mariadb.blocking_caller,
}


@pytest.fixture(params=sorted(ENGINES))
def engine_name(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
async def unopened_engine(engine_name: str, tmp_path: Path) -> AsyncIterator[Engine]:
    """An engine of each kind that was built but never opened; closed and cleaned up afterwards."""
    schemas: list[str] = []
    engine = ENGINES[engine_name](tmp_path, schemas)
    try:
        yield engine
    finally:
        await engine.close()
        for schema in schemas:
            release_schema(schema)


@pytest.fixture
async def any_engine(unopened_engine: Engine) -> Engine:
    """An installed, open engine of each kind (cleaned up by ``unopened_engine``)."""
    await unopened_engine.open()
    await unopened_engine.install()
    return unopened_engine


@asynccontextmanager
async def started_node(
    engine_name: str, tmp_path: Path, *, telemetry: dict[str, Any] | None = None, **options: Any
) -> AsyncIterator[Conveyor]:
    """A started node on a fresh installation of the engine (fast polling, no leadership, queue
    "default" of limit 5, unless ``options`` say otherwise); stopped and cleaned up afterwards.
    ``telemetry``: handlers by event prefix, attached before the node starts (to see its first
    events)."""
    settings: dict[str, Any] = {
        "queues": {"default": 5},
        "poll_interval": 0.1,
        "stage_interval": 0.1,
        "leadership": False,
    }
    schemas: list[str] = []
    engine = ENGINES[engine_name](tmp_path, schemas)
    await engine.open()
    app = Conveyor(engine=engine, **(settings | options))
    for prefix, handler in (telemetry or {}).items():
        app.on(prefix, handler)
    try:
        await app.install()
        await app.start()
        yield app
    finally:
        await app.stop(grace=1)
        await engine.close()
        for schema in schemas:
            release_schema(schema)


#: The apps ``make_app`` made for the running test: ``advance`` (fake-time contract) waits for
#: those on its clock after each step.
MADE_APPS: list[Conveyor] = []


@pytest.fixture
async def make_app(engine_name: str, tmp_path: Path) -> AsyncIterator[Callable[..., Conveyor]]:
    """A factory of apps (``make_app(**settings)``) on one fresh database of each engine; every app
    it made is stopped (closing its engine) and the database released after the test."""
    schemas: list[str] = []
    apps: list[Conveyor] = []

    def factory(**settings: Any) -> Conveyor:
        app = Conveyor(engine=ENGINES[engine_name](tmp_path, schemas), **settings)
        apps.append(app)
        MADE_APPS.append(app)
        return app

    yield factory
    MADE_APPS.clear()
    for app in apps:
        await app.stop(grace=1)
    for schema in schemas:
        release_schema(schema)


@pytest.fixture
async def node_app(engine_name: str, tmp_path: Path) -> AsyncIterator[Conveyor]:
    """A started node (queue "default", limit 5, fast polling, no leadership) on each engine."""
    async with started_node(engine_name, tmp_path) as app:
        yield app


@pytest.fixture
async def caller_conn(engine_name: str, any_engine: Engine) -> AsyncIterator[Any]:
    """An application's own connection to ``any_engine``'s database, closed (rolled back) after."""
    conn = await CALLER_CONNECTIONS[engine_name](any_engine)
    try:
        yield conn
    finally:
        await conn.close()


@asynccontextmanager
async def engines_on_one_database(
    engine_name: str, tmp_path: Path, count: int
) -> AsyncIterator[list[Engine]]:
    """``count`` open engines of one kind on one installed database, each with pools of its own."""
    schemas: list[str] = []
    engines = [ENGINES[engine_name](tmp_path, schemas) for _ in range(count)]
    try:
        for engine in engines:
            await engine.open()
        await engines[0].install()
        yield engines
    finally:
        for engine in engines:
            await engine.close()
        for schema in schemas:
            release_schema(schema)


@pytest.fixture
async def fleet_engines(engine_name: str, tmp_path: Path) -> AsyncIterator[list[Engine]]:
    """Three open engines of one kind on one installed database, as three nodes would have."""
    async with engines_on_one_database(engine_name, tmp_path, 3) as engines:
        yield engines
