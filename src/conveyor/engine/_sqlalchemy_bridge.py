"""Reaching the driver connection underneath a SQLAlchemy session or connection, so a caller's
SQLAlchemy transaction can carry Conveyor's inserts. Each engine then checks the driver's type."""

from __future__ import annotations

from typing import Any


def _is_sqlalchemy(obj: Any, *names: str) -> bool:
    """Is ``obj`` one of SQLAlchemy's classes ``names``, or a subclass of one (an
    ``async_sessionmaker(class_=...)`` session, SQLModel's ``AsyncSession``)? Checked by name, so
    SQLAlchemy stays an optional dependency."""
    return any(cls.__module__.startswith("sqlalchemy") and cls.__name__ in names for cls in type(obj).__mro__)


async def async_driver(conn: Any) -> Any | None:
    """The driver connection under an AsyncSession/AsyncConnection (None for anything else)."""
    if _is_sqlalchemy(conn, "AsyncSession"):
        conn = await conn.connection()  # begins the session's transaction if needed
    if _is_sqlalchemy(conn, "AsyncConnection"):
        if not conn.in_transaction():
            # A connection begins its transaction at its first statement (autobegin): ours must
            # begin it too, or the caller's commit() would find no transaction and our
            # statements would be rolled back with the connection.
            await conn.begin()
        raw = await conn.get_raw_connection()
        driver = raw.driver_connection
        if _begins_lazily(raw, driver):
            # SQLAlchemy's asyncpg adapter sends BEGIN with the transaction's first statement, not
            # when the session begins: statements of ours sent before it would commit on their own.
            # One statement through SQLAlchemy makes the adapter begin for real.
            await conn.exec_driver_sql("SELECT 1")
        return driver
    return None


def _begins_lazily(raw: Any, driver: Any) -> bool:
    """Is ``driver`` an asyncpg connection whose SQLAlchemy transaction has not sent BEGIN yet?"""
    if not type(driver).__module__.startswith("asyncpg") or driver.is_in_transaction():
        return False
    return not getattr(raw.dbapi_connection, "autocommit", False)


def sync_driver(conn: Any) -> Any | None:
    """The driver connection under a Session/Connection (None for anything else)."""
    if _is_sqlalchemy(conn, "Session"):
        conn = conn.connection()  # begins the session's transaction if needed
    if _is_sqlalchemy(conn, "Connection"):
        if not conn.in_transaction():
            conn.begin()  # autobegin, as for an AsyncConnection above
        return conn.connection.driver_connection
    return None
