"""Database URLs: which engine one names (``engine_from_url``), and the default one.

``postgresql://user@host/db`` and libpq's key=value form (``host=db dbname=app user=app``) build a
PostgresEngine. ``sqlite:///relative/path.db``,
``sqlite:////absolute/path.db`` and ``sqlite://:memory:`` build a SqliteEngine.
``mysql://user@host/db`` and ``mariadb://user@host/db`` build a MysqlEngine (the ``mysql`` extra).
Without a URL (no argument, no ``$CONVEYOR_DATABASE_URL``, nothing in the config file) Conveyor
uses the SQLite file ``conveyor.db`` in the working directory: see ``default_database_url``.
"""

from __future__ import annotations

import os

from conveyor.engine.base import Engine
from conveyor.errors import ValidationError

#: SQLAlchemy's spellings are accepted too, so one URL can serve both.
SQLITE_SCHEMES = ("sqlite://", "sqlite+pysqlite://", "sqlite+aiosqlite://")
#: The database file used when no URL is given, relative to the working directory.
DEFAULT_SQLITE_FILE = "conveyor.db"
SQLITE_FORMS = "sqlite:///relative/path.db, sqlite:////absolute/path.db or sqlite://:memory:"


def default_database_url() -> str:
    """The URL used when none is configured: ``conveyor.db`` in the working directory, made
    absolute now so a later change of directory does not change the database."""
    return "sqlite:///" + os.path.abspath(DEFAULT_SQLITE_FILE)


def sqlite_path(url: str) -> str:
    """The file a ``sqlite://`` URL names (``:memory:`` for an in-memory database)."""
    rest = url.split("://", 1)[1]
    if rest in ("", ":memory:", "/:memory:"):
        return ":memory:"
    if "?" in rest or "#" in rest:
        raise ValidationError("database_url", url, f"SQLite URLs take no query string; use {SQLITE_FORMS}")
    if not rest.startswith("/") or rest == "/":
        raise ValidationError("database_url", url, f"not a SQLite file URL; use {SQLITE_FORMS}")
    return rest[1:]


def is_sqlite_url(url: str | None) -> bool:
    return url is None or url.startswith(SQLITE_SCHEMES)


def is_postgres_url(url: str) -> bool:
    """A ``postgresql://`` URL or a libpq key=value string (``host=... dbname=...``)."""
    from conveyor.engine.postgres import dsn

    return dsn.is_postgres(url)


def is_mysql_url(url: str) -> bool:
    """A ``mysql://`` or ``mariadb://`` URL (SQLAlchemy's ``mysql+driver://`` too)."""
    from conveyor.engine.mysql.address import is_mysql_url as is_mysql

    return is_mysql(url)


def install_sql(url: str | None, prefix: str = "public") -> str:
    """The SQL ``conveyor install`` runs for the engine ``url`` chooses (for --print-sql)."""
    if is_sqlite_url(url):
        from conveyor.engine.sqlite import schema as sqlite_schema

        return sqlite_schema.install_sql(prefix)
    if url is not None and is_mysql_url(url):
        from conveyor.engine.mysql import MysqlEngine
        from conveyor.engine.mysql import schema as mysql_schema

        return mysql_schema.install_sql(MysqlEngine(url, prefix=prefix).database)
    engine_from_url(url, prefix=prefix)  # refuses unsupported URLs, opens nothing
    from conveyor.engine.postgres import schema as postgres_schema

    return postgres_schema.install_sql(prefix)


def engine_from_url(
    url: str | None = None,
    *,
    prefix: str = "public",
    pool_size: int = 10,
    synchronous_commit: bool = True,
    pooler: str = "auto",
    listen_url: str | None = None,
) -> Engine:
    """An engine for ``postgresql://...``, ``sqlite://...`` or ``mysql://...`` (``mariadb://...``)
    URLs; None means the default SQLite file (``default_database_url``). ``synchronous_commit``,
    ``pooler`` and ``listen_url`` apply to PostgreSQL only (SQLite commits with ``synchronous =
    NORMAL`` in WAL mode: never waiting for the disk); ``pool_size`` to PostgreSQL and MySQL."""
    if url is None:
        url = default_database_url()
    if not isinstance(url, str) or not url:
        raise ValidationError("database_url", url, "must be a non-empty URL string")
    if url.startswith(SQLITE_SCHEMES):  # first: a SQLite URL never loads psycopg and its pool
        from conveyor.engine.sqlite import SqliteEngine

        return SqliteEngine(sqlite_path(url), prefix=prefix)
    if is_mysql_url(url):  # before PostgreSQL: never loads psycopg either
        from conveyor.engine.mysql import MysqlEngine

        return MysqlEngine(url, prefix=prefix, max_connections=pool_size)
    if is_postgres_url(url):
        from conveyor.engine.postgres import PostgresEngine
        from conveyor.engine.postgres import dsn as postgres_dsn

        dsn = postgres_dsn.check(url)  # parsed as libpq will, refused with the password masked
        return PostgresEngine(
            dsn,
            prefix=prefix,
            max_connections=pool_size,
            synchronous_commit=synchronous_commit,
            pooler=pooler,
            listen_url=postgres_dsn.check(listen_url, "listen_url") if listen_url is not None else None,
        )
    from conveyor.engine.postgres.dsn import mask

    raise ValidationError(
        "database_url",
        mask(url),
        f"unsupported scheme; use postgresql://user@host/db, host=... dbname=..., "
        f"mysql://user@host/db, mariadb://user@host/db or {SQLITE_FORMS}",
    )
