"""Reaching the driver connection underneath a SQLAlchemy session or connection, so a caller's
SQLAlchemy transaction can carry Conveyor's inserts. Each engine then checks the driver's type."""

from __future__ import annotations

from typing import Any


def _is_sqlalchemy(obj: Any, *names: str) -> bool:
    return type(obj).__module__.startswith("sqlalchemy") and type(obj).__name__ in names


async def async_driver(conn: Any) -> Any | None:
    """The driver connection under an AsyncSession/AsyncConnection (None for anything else)."""
    if _is_sqlalchemy(conn, "AsyncSession"):
        conn = await conn.connection()  # begins the session's transaction if needed
    if _is_sqlalchemy(conn, "AsyncConnection"):
        raw = await conn.get_raw_connection()
        return raw.driver_connection
    return None


def sync_driver(conn: Any) -> Any | None:
    """The driver connection under a Session/Connection (None for anything else)."""
    if _is_sqlalchemy(conn, "Session"):
        conn = conn.connection()  # begins the session's transaction if needed
    if _is_sqlalchemy(conn, "Connection"):
        return conn.connection.driver_connection
    return None
