"""The former home of ``conveyor.engine.urls`` (choosing an engine from a database URL), kept so that
imports written against it go on working. New code imports ``conveyor.engine.urls``."""

from conveyor.engine.urls import (
    DEFAULT_SQLITE_FILE,
    SQLITE_FORMS,
    SQLITE_SCHEMES,
    default_database_url,
    engine_from_url,
    install_sql,
    is_postgres_url,
    is_sqlite_url,
    sqlite_path,
)

__all__ = [
    "DEFAULT_SQLITE_FILE",
    "SQLITE_FORMS",
    "SQLITE_SCHEMES",
    "default_database_url",
    "engine_from_url",
    "install_sql",
    "is_postgres_url",
    "is_sqlite_url",
    "sqlite_path",
]
