"""The MariaDB (MySQL) side of the conformance registry: where the server is, whether it answers,
and the private database each test gets (``conveyor_conf_<hex>``, dropped afterwards).

The conformance cases recycle them (``factory(..., spare=True)``, ``release(..., keep=True)``): a
finished case's database, still installed and current, is emptied and handed to the next case of
this process. Emptying a dozen small tables costs a few milliseconds of the server's CPU; creating a
database and running the thirteen migrations again cost about 50 ms of it and 100 ms of wall time (the
DDL's fsyncs), per case, 900 cases a run. One whose schema is not intact (uninstalled, an object
missing, an older version) is dropped, as every database of the other tests is.

``CONVEYOR_MARIADB_URL`` names the server (default: the machine's, root without a password);
when it does not answer, every mariadb case is skipped saying so (``UNREACHABLE``).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import UTC, datetime
from typing import Any

from conveyor.engine._migrations import LATEST_VERSION, missing_from
from conveyor.engine.base import Engine
from conveyor.engine.mysql import MysqlEngine
from conveyor.engine.mysql.address import parse
from conveyor.engine.mysql.connect import SESSION_SETUP
from conveyor.engine.mysql.schema import OBJECTS, files

URL = os.environ.get("CONVEYOR_MARIADB_URL", "mariadb://root@127.0.0.1:3306/test")
#: How a database name is marked in a factory's ``schemas`` list, for ``release``.
TAG = "mariadb:"


def _blocking(database: str | None = None, **options: Any) -> Any:
    import pymysql

    address = parse(URL)
    return pymysql.connect(
        host=address.host,
        port=address.port,
        user=address.user,
        password=address.password,
        database=database,
        connect_timeout=2,
        # PyMySQL (1.2) otherwise builds a TLS context for every connection, to try TLS first: 50 ms
        # of CPU each, where the engine's own (asyncmy) connections use none.
        ssl_disabled=True,
        **({"init_command": "SET time_zone = '+00:00'"} | options),
    )


def _unreachable() -> str | None:
    """Why the MariaDB cases cannot run here, or None when a server answers."""
    try:
        _blocking().close()
    except Exception as exc:
        return f"no MariaDB/MySQL server at {parse(URL).url} ({exc}); set CONVEYOR_MARIADB_URL"
    return None


#: Checked once per process, at collection.
UNREACHABLE = _unreachable()


#: Databases a finished conformance case left installed and empty, for the next one to take.
_spare: list[str] = []
#: The connection that empties and drops them, kept for the process (``_admin``).
_admin_conn: list[Any] = []


def factory(schemas: list[str], *, spare: bool = False) -> Engine:
    """An engine on a private database: the one noted in ``schemas`` (tagged), else a new one, or
    with ``spare`` one a finished case left installed and empty (see the module's docstring)."""
    tagged = [name for name in schemas if name.startswith(TAG)]
    if not tagged:
        database = _spare.pop() if spare and _spare else f"conveyor_conf_{uuid.uuid4().hex[:10]}"
        tagged = [f"{TAG}{database}"]
        schemas.append(tagged[0])
    return MysqlEngine(URL, prefix=tagged[0][len(TAG) :], max_connections=4)


@asynccontextmanager
async def installed() -> AsyncIterator[MysqlEngine]:
    """An open engine on a private database of its own, installed; closed and dropped afterwards."""
    schemas: list[str] = []
    engine = factory(schemas)
    assert isinstance(engine, MysqlEngine)
    await engine.open()
    await engine.install()
    try:
        yield engine
    finally:
        await engine.close()
        release(schemas[0])


def release(name: str, *, keep: bool = False) -> bool:
    """Drop the database a tagged ``name`` names, or with ``keep`` empty it for the next case when
    its schema is intact; False when ``name`` is not MariaDB's."""
    if not name.startswith(TAG):
        return False
    database = name[len(TAG) :]
    with _admin() as cursor:
        if keep and _emptied(cursor, database):
            _spare.append(database)
        else:
            cursor.execute(f"DROP DATABASE IF EXISTS `{database}`")
    return True


def existing(names: set[str]) -> set[str]:
    """Which of the databases ``names`` the server has."""
    conn = _blocking()
    try:
        with conn.cursor() as cursor:
            cursor.execute(
                "SELECT schema_name FROM information_schema.schemata WHERE schema_name IN %s", [names]
            )
            return {str(row[0]) for row in cursor.fetchall()}
    finally:
        conn.close()


@contextmanager
def _admin() -> Iterator[Any]:
    """A cursor on the process's admin connection, made again when the last one broke."""
    if not _admin_conn:
        # The engine's session settings: its statements (schema_objects) need ANSI_QUOTES.
        _admin_conn.append(_blocking(autocommit=True, init_command=SESSION_SETUP))
    try:
        with _admin_conn[0].cursor() as cursor:
            yield cursor
    except Exception:
        _admin_conn.pop().close()
        raise


def _emptied(cursor: Any, database: str) -> bool:
    """Delete every row of ``database``'s tables but the migrations' record, if its schema is the
    latest and whole (the engine's own inventory, ``OBJECTS``); False, touching nothing, if not."""
    cursor.execute(files(database)["schema_objects"])
    present = {str(row[0]) for row in cursor.fetchall()}
    if "conveyor_migrations" not in present or missing_from(OBJECTS, present):
        return False
    cursor.execute(files(database)["migrations_version"])
    (version,) = cursor.fetchone()
    if version != LATEST_VERSION:
        return False
    tables_of = "SELECT table_name FROM information_schema.tables WHERE table_schema = %s"
    cursor.execute(f"{tables_of} AND table_type = 'BASE TABLE'", (database,))
    tables = [str(row[0]) for row in cursor.fetchall() if row[0] != "conveyor_migrations"]
    cursor.execute("BEGIN")
    for table in tables:
        cursor.execute(f"DELETE FROM `{database}`.`{table}`")
    cursor.execute("COMMIT")
    return True


def drop_spares() -> None:
    """Drop the databases left for cases this process will not run."""
    with _admin() as cursor:
        while _spare:
            cursor.execute(f"DROP DATABASE IF EXISTS `{_spare.pop()}`")


def address(engine: Engine) -> tuple[str, str]:
    assert isinstance(engine, MysqlEngine)
    return URL, engine.prefix


class CallerConnection:
    """An application's asyncmy connection, as the fixtures use one: asyncmy's ``close`` is
    synchronous where the fixtures await it (``ensure_closed``)."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)

    async def close(self) -> None:
        await self.conn.ensure_closed()


async def _connect(engine: MysqlEngine) -> Any:
    import asyncmy

    a = engine.address
    return await asyncmy.connect(
        host=a.host, port=a.port, user=a.user, password=a.password, database=engine.database, autocommit=False
    )


async def caller(engine: Engine) -> Any:
    assert isinstance(engine, MysqlEngine)
    return CallerConnection(await _connect(engine))


@contextmanager
def blocking_caller(engine: Engine) -> Iterator[Any]:
    assert isinstance(engine, MysqlEngine)
    conn = _blocking(engine.database, autocommit=False)
    try:
        yield conn
        conn.commit()
    finally:
        conn.close()


async def _execute(engine: MysqlEngine, statement: str, params: tuple[Any, ...]) -> None:
    """One statement on a connection of its own, committed: what another client writes."""
    conn = await _connect(engine)
    try:
        async with conn.cursor() as cursor:
            await cursor.execute(statement, params)
        await conn.commit()
    finally:
        conn.close()


async def unstamp(engine: Engine, job_id: int, scheduled_at: datetime) -> None:
    assert isinstance(engine, MysqlEngine)
    statement = (
        f"UPDATE `{engine.database}`.oban_jobs SET attempted_at = NULL, scheduled_at = %s WHERE id = %s"
    )
    await _execute(engine, statement, (scheduled_at.astimezone(UTC).replace(tzinfo=None), job_id))


async def rewrite(engine: Engine, job_id: int, column: str, text: str) -> None:
    assert isinstance(engine, MysqlEngine) and column in ("args", "meta")
    await _execute(
        engine, f"UPDATE `{engine.database}`.oban_jobs SET {column} = %s WHERE id = %s", (text, job_id)
    )
