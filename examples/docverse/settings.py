"""Configuration, from the environment, as the service would be deployed.

Conveyor reads its own settings from ``CONVEYOR_*`` variables: ``CONVEYOR_DATABASE_URL`` picks the
engine (``postgresql://...``, or ``sqlite:///docverse.db``; unset, ``conveyor.db`` in the working
directory) and ``CONVEYOR_PREFIX`` the PostgreSQL schema. The service's own tables live in that same
database and schema, so one transaction covers a build row and its job: their SQLAlchemy URL is
derived from Conveyor's, never configured apart, so the two cannot drift.
"""

from __future__ import annotations

from conveyor import Conveyor
from conveyor.engine.urls import is_sqlite_url, sqlite_path

#: Queues a worker serves: builds run four at a time, the cleanup alone.
QUEUES = {"builds": 4, "maintenance": 1}
#: Where the jobs are defined: a node imports it at start, which also schedules the cron entry.
JOB_MODULES = ["docverse.jobs"]
#: When the cleanup runs, and how old a build no edition serves must be before it goes.
CLEANUP_CRON = "@hourly"
STALE_AFTER_DAYS = 30


def make_conveyor(*, run_jobs: bool) -> Conveyor:
    """The app of a web process (``run_jobs=False``: it only enqueues and reads jobs) or of a
    worker (it runs a node serving ``QUEUES``); both take the database from the environment."""
    if run_jobs:
        return Conveyor(queues=QUEUES, imports=JOB_MODULES)
    return Conveyor()


def sqlalchemy_url(conveyor_url: str) -> str:
    """SQLAlchemy's URL for the database a Conveyor URL names, with the drivers Conveyor can join
    the transactions of: psycopg 3 for PostgreSQL, aiosqlite for SQLite."""
    if is_sqlite_url(conveyor_url):
        path = sqlite_path(conveyor_url)
        if path == ":memory:":  # SQLAlchemy's connections would each see another, empty database
            raise ValueError("Docverse needs a SQLite file, not an in-memory database")
        return f"sqlite+aiosqlite:///{path}"
    scheme, _, rest = conveyor_url.partition("://")
    if scheme not in ("postgresql", "postgres", "postgresql+psycopg"):
        raise ValueError(f"unsupported database URL scheme {scheme!r}")
    return f"postgresql+psycopg://{rest}"
