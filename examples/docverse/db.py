"""The service's connection to its database: the one Conveyor uses, found from the Conveyor app.

Request handlers and jobs both reach it through ``database_of(app)``: a job has no other way to
its web process's objects (it may run in a worker process of its own), but it always has the
Conveyor app that runs it (``current_app()``), whose settings name the database.
"""

from __future__ import annotations

from typing import Any
from weakref import WeakKeyDictionary

from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine

from conveyor import Conveyor
from conveyor.engine.urls import is_sqlite_url
from docverse.models import Base
from docverse.settings import sqlalchemy_url


class Database:
    """An async SQLAlchemy engine and its sessions; on PostgreSQL every table name is put in
    ``schema`` (Conveyor's prefix), so the models need no schema of their own."""

    def __init__(self, url: str, *, schema: str | None = None) -> None:
        options: dict[str, Any] = {"schema_translate_map": {None: schema}} if schema else {}
        # SQLite: wait for the write lock as long as Conveyor's engine does (30 s), not 5 s: the
        # node's claims and acks take it between our statements.
        connect_args = {"timeout": 30} if url.startswith("sqlite") else {}
        self.engine: AsyncEngine = create_async_engine(
            url, execution_options=options, connect_args=connect_args
        )
        # Objects stay readable after commit: a handler answers with the row it just committed.
        self.sessions = async_sessionmaker(self.engine, expire_on_commit=False)

    @classmethod
    def for_conveyor(cls, conveyor: Conveyor) -> Database:
        url = conveyor.settings.database_url
        if url is None:
            raise ValueError("the Conveyor app has no database URL (it was given an engine)")
        return cls(sqlalchemy_url(url), schema=None if is_sqlite_url(url) else conveyor.settings.prefix)

    async def create_tables(self) -> None:
        """Create the tables that are missing (a deploy step, like ``conveyor install``; a real
        service would run its migrations). On PostgreSQL the schema must exist: install Conveyor
        first."""
        async with self.engine.begin() as conn:
            await conn.run_sync(Base.metadata.create_all)

    async def drop_tables(self) -> None:
        async with self.engine.begin() as conn:
            await conn.run_sync(Base.metadata.drop_all)

    async def dispose(self) -> None:
        """Close the pooled connections (the engine opens new ones if used again)."""
        await self.engine.dispose()


# One Database per Conveyor app, so every request and job of a process shares one connection
# pool; weak keys, so it goes when the app does (each test's app gets its own database).
_databases: WeakKeyDictionary[Conveyor, Database] = WeakKeyDictionary()


def database_of(conveyor: Conveyor) -> Database:
    """The service's database for ``conveyor``: the same database, and on PostgreSQL the same
    schema, as the app's jobs."""
    database = _databases.get(conveyor)
    if database is None:
        database = _databases[conveyor] = Database.for_conveyor(conveyor)
    return database
