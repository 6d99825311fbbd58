"""Choosing an engine from a database URL."""

from __future__ import annotations

from conveyor.engine.base import Engine
from conveyor.errors import ValidationError

POSTGRES_SCHEMES = ("postgresql://", "postgres://", "postgresql+psycopg://")


def engine_from_url(url: str, *, prefix: str = "public", pool_size: int = 10) -> Engine:
    """An engine for ``postgresql://...`` URLs."""
    if not isinstance(url, str) or not url:
        raise ValidationError("database_url", url, "must be a non-empty URL string")
    if url.startswith(POSTGRES_SCHEMES):
        from conveyor.engine.postgres import PostgresEngine

        dsn = url.replace("postgresql+psycopg://", "postgresql://", 1)
        return PostgresEngine(dsn, prefix=prefix, max_connections=pool_size)
    raise ValidationError("database_url", url, "unsupported scheme; use postgresql://user@host/db")
