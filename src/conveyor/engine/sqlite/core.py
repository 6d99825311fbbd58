"""The core every duty of ``SqliteEngine`` shares: the database file and its threads, opening and
closing, the schema, and the statement texts."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from datetime import datetime, timedelta
from typing import Any

from conveyor.engine.roles.schema import SchemaReport
from conveyor.engine.sqlite import database, inspection, schema
from conveyor.engine.sqlite.database import MEMORY, Database
from conveyor.engine.sqlite.rows import time_text
from conveyor.errors import ConveyorError, EngineClosedError, SchemaError, ValidationError

FILES = schema.FILES
#: The statements use ->> (3.38), RETURNING (3.35) and UPDATE ... FROM (3.33).
MINIMUM_SQLITE = (3, 38, 0)


def compose(name: str, condition: str, demand: str = "fetch_demand") -> str:
    """File ``name`` with its fragments filled in the one way every engine renders SQL
    (``SqlFiles.compose``: each ``{part}`` is the text of the file it names) and, for statements that
    filter, the WHERE ``condition`` built for the request (``{filter}``: ``jobs.filter_condition``)."""
    text = FILES.compose(
        name,
        claim_update="claim_update",  # first: it holds columns and claimed_meta
        columns="job_columns",
        unique_key="unique_key",
        lock_free="lock_free",
        claimed_meta="claimed_meta",
        demand=demand,
        # After demand (fetch_demand_limited.sql holds running_jobs), running_jobs before
        # still_running and stopping_ids, lock_free before stopping_ids, still_running before
        # own_producer: each holds the next.
        running_jobs="running_jobs",
        still_running="still_running",
        stopping_ids="stopping_ids",
        own_producer="own_producer",
        step_with_deps="step_with_deps",
    )
    return text.replace("{filter}", condition)


class SqliteCore:
    """The database and the settings of one engine (see ``SqliteEngine``); the duty classes build on it."""

    def __init__(
        self,
        path: str | os.PathLike[str] = "conveyor.db",
        *,
        prefix: str = schema.DEFAULT_PREFIX,
        busy_timeout: float = database.DEFAULT_BUSY_TIMEOUT,
    ) -> None:
        self.prefix = schema.check_prefix(prefix)
        if sqlite3.sqlite_version_info < MINIMUM_SQLITE:
            raise ConveyorError(
                f"the SQLite engine needs SQLite {'.'.join(map(str, MINIMUM_SQLITE))} or newer; "
                f"this Python's sqlite3 module uses {sqlite3.sqlite_version}"
            )
        raw = os.fspath(path)
        if not raw:
            raise ValidationError("path", raw, "must name a database file or ':memory:'")
        #: The absolute path of the database file, or ":memory:".
        self.path = raw if raw == MEMORY else os.path.abspath(raw)
        if isinstance(busy_timeout, bool) or not isinstance(busy_timeout, int | float) or busy_timeout < 0:
            raise ValidationError("busy_timeout", busy_timeout, "must be a number of seconds >= 0")
        self.busy_timeout = float(busy_timeout)
        self._db: Database | None = None
        self._fetch = compose("fetch_jobs", "")
        self._fetch_limited = compose("fetch_jobs", "", "fetch_demand_limited")
        #: Claims under partitioned limits, by the shapes of their partitions (hot_path).
        self._partitioned: dict[Any, tuple[str, str]] = {}
        self._get = compose("get_job", "")

    @property
    def url(self) -> str:
        return "sqlite://:memory:" if self.path == MEMORY else f"sqlite:///{self.path}"

    # -- lifecycle ---------------------------------------------------------------------------
    async def open(self) -> None:
        if self._db is None:
            db = await asyncio.to_thread(database.acquire, self.path, busy_timeout=self.busy_timeout)
            if self._db is None:
                self._db = db
            else:  # another task opened it meanwhile
                database.release(db)

    async def close(self) -> None:
        self.abandon()

    def abandon(self) -> None:
        # The database runs on its own threads, bound to no loop: releasing it is all there is.
        if self._db is not None:
            db, self._db = self._db, None
            database.release(db)

    @property
    def database(self) -> Database:
        if self._db is None:
            raise EngineClosedError("the SQLite engine is not open; call await engine.open()")
        return self._db

    # -- schema ------------------------------------------------------------------------------
    async def install(self) -> int:
        return await self.database.write(lambda tx: schema.migrate(tx.conn))

    async def uninstall(self) -> None:
        await self.database.write(lambda tx: schema.uninstall(tx.conn))

    async def schema_version(self) -> int | None:
        return await self.database.read(schema.installed_version)

    async def check_schema(self) -> None:
        """Fail with a clear message when the schema is missing, older than this Conveyor, or lacks
        a table its migrations create."""
        where, options = f"the Conveyor schema in {self.path}", f" --dsn {self.url}"
        problem = await self.database.read(lambda conn: schema.check(conn, where, options))
        if problem is not None:
            raise SchemaError(problem)

    async def inspect_schema(self, *, create: bool = False, patient: bool = False) -> SchemaReport:
        # ``patient`` changes nothing here: a file has no connection slots to wait for.
        return await asyncio.to_thread(inspection.inspect, self.path, self.url, create=create)

    async def migration_plan(self) -> str:
        report = await self.inspect_schema(create=True)
        return inspection.plan(report, self.prefix)


def ago(clock: datetime, seconds: float) -> str:
    return time_text(clock - timedelta(seconds=seconds))
