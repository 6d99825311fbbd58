"""The core every duty of ``MysqlEngine`` shares: the address, the pool, opening and closing, the
schema role, and the statement texts of its database."""

from __future__ import annotations

import contextlib
import re
from typing import Any

from conveyor.engine._migrations import LATEST_VERSION
from conveyor.engine._sqlfiles import SqlFiles
from conveyor.engine.mysql import address as addresses
from conveyor.engine.mysql import connect, fanout, schema
from conveyor.engine.mysql.caller import joined
from conveyor.engine.mysql.connect import reading, transaction
from conveyor.engine.roles.schema import SchemaReport
from conveyor.errors import ConveyorError, SchemaError, ValidationError

DEFAULT_PREFIX = "public"
#: What MySQL accepts as a database name unquoted, as Conveyor accepts prefixes.
_DATABASE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$]{0,63}")


class MysqlCore:
    """The connection pool and the settings of one engine (see ``MysqlEngine``)."""

    name = "mysql"

    def __init__(self, url: str, *, prefix: str = DEFAULT_PREFIX, max_connections: int = 10) -> None:
        self.address = addresses.parse(url)
        if not isinstance(prefix, str) or not (prefix == DEFAULT_PREFIX or _DATABASE_NAME.fullmatch(prefix)):
            raise ValidationError(
                "prefix", prefix, "must be a database name (letters, digits, _ and $, at most 64)"
            )
        #: The database Conveyor's tables live in: the URL's, or the one ``prefix`` names
        #: (MySQL's databases play the part of PostgreSQL's schemas).
        self.database = self.address.database if prefix == DEFAULT_PREFIX else prefix
        self.prefix = prefix
        if isinstance(max_connections, bool) or not isinstance(max_connections, int) or max_connections < 1:
            raise ValidationError("max_connections", max_connections, "must be an int >= 1")
        self.max_connections = max_connections
        self.files: SqlFiles = schema.files(self.database)
        #: This process's listeners on the database, told of a transaction's notifications at its
        #: commit (``fanout``).
        self.hub = fanout.hub_for(self.address.host, self.address.port, self.database)
        self._pool: Any = None

    def __repr__(self) -> str:
        return f"MysqlEngine({self.address.url!r}, database={self.database!r})"

    @property
    def url(self) -> str:
        return self.address.url

    # -- lifecycle ---------------------------------------------------------------------------
    async def open(self) -> None:
        if self._pool is not None:
            return
        try:
            pool = await connect.create_pool(self.address, size=self.max_connections)
        except Exception as exc:
            raise ConveyorError(f"cannot connect to {self.address.url}: {_reason(exc)}") from exc
        if self._pool is None:
            self._pool = pool
        else:  # another task opened it meanwhile
            pool.close()
            await pool.wait_closed()

    async def close(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            pool.close()
            await pool.wait_closed()

    def abandon(self) -> None:
        """Let go of a pool whose event loop is gone (the optional ``Abandoning`` role): its
        connections' sockets are closed here, without that loop; ``open`` makes a new pool on the
        running loop. The server rolls back what they left open and releases their named locks."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        for conn in [*pool._free, *pool._used]:
            transport, conn._transport = conn._transport, None
            with contextlib.suppress(Exception):  # the loop is closed: it cannot schedule the rest
                transport.abort()
            with contextlib.suppress(Exception):
                sock, transport._sock = transport._sock, None  # closed here, not warned of later
                sock.close()

    def transaction(self, *, keyed: bool = False, committed: bool = False) -> Any:
        """``async with self.transaction() as cursor``: one transaction, committed at the end, its
        notifications handed to this process's listeners then (``keyed``, ``committed``: see
        ``connect.in_transaction``)."""
        return transaction(self._pool, keyed=keyed, committed=committed, hub=self.hub)

    def within(self, conn: Any = None, *, keyed: bool = False) -> Any:
        """``async with self.within(conn) as cursor``: in the caller's transaction on ``conn``
        (``caller.joined``), else in a transaction of the engine's own."""
        return self.transaction(keyed=keyed) if conn is None else joined(conn)

    def reading(self) -> Any:
        """``async with self.reading() as cursor``: statements in autocommit."""
        return reading(self._pool)

    # -- schema ------------------------------------------------------------------------------
    async def install(self) -> int:
        async with self.reading() as cursor:
            return await schema.migrate(cursor, self.database)

    async def uninstall(self) -> None:
        async with self.reading() as cursor:
            await schema.uninstall(cursor, self.database)

    async def schema_version(self) -> int | None:
        async with self.reading() as cursor:
            return await schema.installed_version(cursor, self.database)

    def _where(self) -> tuple[str, str]:
        option = "" if self.prefix == DEFAULT_PREFIX else f" --prefix {self.prefix}"
        return f"the Conveyor schema in MySQL database {self.database!r}", f"{option} --dsn {self.url}"

    async def check_schema(self) -> None:
        where, options = self._where()
        async with self.reading() as cursor:
            problem = await schema.problem(cursor, self.database, where, options)
        if problem is not None:
            raise SchemaError(problem)

    async def inspect_schema(self, *, create: bool = False, patient: bool = False) -> SchemaReport:
        # ``create`` changes nothing: install creates the database when it is missing.
        where, options = self._where()
        try:
            conn = await connect.connect(self.address)
        except Exception as exc:
            raise ConveyorError(f"cannot connect to {self.address.url}: {_reason(exc)}") from None
        try:
            async with conn.cursor() as cursor:
                version = await schema.installed_version(cursor, self.database)
                missing = await schema.missing_objects(cursor, self.database) if version is not None else []
        finally:
            conn.close()
        return SchemaReport(version, tuple(name for _, name in missing), where, options)

    async def migration_plan(self) -> str:
        report = await self.inspect_schema(create=True)
        start = 0 if report.missing else report.version or 0
        if start >= LATEST_VERSION:
            return f"{report.where} is already at version {LATEST_VERSION}: nothing to apply"
        count = LATEST_VERSION - start
        headline = (
            f"{report.where}: version {report.version if report.version is not None else 'absent'} → "
            f"{LATEST_VERSION}: would apply {count} migration{'s' if count != 1 else ''}, statement by "
            "statement (MySQL commits each DDL statement), under a named lock"
        )
        return f"{headline}\n{schema.install_sql(self.database, from_version=start)}"

    # -- failures ----------------------------------------------------------------------------
    def is_transient(self, exc: BaseException) -> bool:
        return connect.is_transient(exc)

    def explain(self, exc: BaseException) -> str | None:
        return connect.explain(exc)


def _reason(exc: BaseException) -> str:
    return connect.explain(exc) or str(exc) or type(exc).__name__
