"""The MariaDB (MySQL) side of the conformance registry: where the server is, whether it answers,
and the private database each test gets (``conveyor_conf_<hex>``, dropped afterwards).

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

from conveyor.engine.base import Engine
from conveyor.engine.mysql import MysqlEngine
from conveyor.engine.mysql.address import parse

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
        init_command="SET time_zone = '+00:00'",
        **options,
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


def factory(schemas: list[str]) -> Engine:
    """An engine on a private database: the one noted in ``schemas`` (tagged), else a new one."""
    tagged = [name for name in schemas if name.startswith(TAG)]
    if not tagged:
        tagged = [f"{TAG}conveyor_conf_{uuid.uuid4().hex[:10]}"]
        schemas.append(tagged[0])
    return MysqlEngine(URL, prefix=tagged[0][len(TAG) :], max_connections=4)


def release(name: str) -> bool:
    """Drop the database a tagged ``name`` names; False when ``name`` is not MariaDB's."""
    if not name.startswith(TAG):
        return False
    conn = _blocking()
    try:
        with conn.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS `{name[len(TAG) :]}`")
    finally:
        conn.close()
    return True


@asynccontextmanager
async def installed() -> AsyncIterator[MysqlEngine]:
    """An open engine on a private database with the schema installed, dropped afterwards (the
    engine-specific tests' fixture)."""
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


async def unstamp(engine: Engine, job_id: int, scheduled_at: datetime) -> None:
    assert isinstance(engine, MysqlEngine)
    conn = await _connect(engine)
    try:
        async with conn.cursor() as cursor:
            await cursor.execute(
                f"UPDATE `{engine.database}`.oban_jobs SET attempted_at = NULL, scheduled_at = %s "
                "WHERE id = %s",
                (scheduled_at.astimezone(UTC).replace(tzinfo=None), job_id),
            )
        await conn.commit()
    finally:
        conn.close()
