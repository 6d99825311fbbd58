"""The pytest plugin of Conveyor, registered by the ``pytest11`` entry point: it adds fixtures and a
marker, and changes nothing unless a test asks for them.

``conveyor_app``: an installed app on a database of the test's own, made the default app for the
test (so ``send.enqueue(...)`` and ``conveyor.testing``'s helpers find it), closed afterwards.

- Where: ``conveyor_database_url`` in the pytest ini options (or the environment variable
  ``CONVEYOR_TEST_DATABASE_URL``). A PostgreSQL URL gives each test a schema of its own, a MySQL or
  MariaDB URL a database of the server of its own (its user needs the right to create and drop
  databases), each dropped afterwards; unset, each test gets a SQLite file in its ``tmp_path``.
- Mode: ``conveyor_testing`` in the ini options, ``manual`` by default (``inline`` runs jobs at
  enqueue; see ``conveyor.testing.modes``). ``@pytest.mark.conveyor(testing="inline", **settings)``
  sets the mode and any ``Conveyor`` setting (``queues``, ``poll_interval`` ...) for one test.

The fixture is synchronous, so it serves plain tests and async ones (pytest-asyncio, anyio) alike.
"""

from __future__ import annotations

import asyncio
import os
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conveyor.app import Conveyor
from conveyor.current_app import default_app, set_default_app
from conveyor.engine.urls import is_mysql_url, is_postgres_url

#: The ini option naming the fixture's database: a PostgreSQL URL (a schema per test), a MySQL or
#: MariaDB URL (a database per test), or unset (a SQLite file per test).
DATABASE_URL_OPTION = "conveyor_database_url"
#: The ini option of the fixture's testing mode: "manual" (the default) or "inline".
MODE_OPTION = "conveyor_testing"
#: The environment variable that names the fixture's database, over the ini option.
DATABASE_URL_VARIABLE = "CONVEYOR_TEST_DATABASE_URL"


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register the ini options ``conveyor_database_url`` and ``conveyor_testing``."""
    parser.addini(
        DATABASE_URL_OPTION,
        "Database of the conveyor_app fixture: a PostgreSQL URL (a schema per test), a MySQL or "
        "MariaDB URL (a database per test) or unset (a SQLite file per test)",
        default="",
    )
    parser.addini(MODE_OPTION, "Testing mode of the conveyor_app fixture: manual or inline", default="manual")


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``conveyor`` marker: ``@pytest.mark.conveyor(testing=..., **settings)``."""
    config.addinivalue_line(
        "markers", "conveyor(testing=..., **settings): the mode and settings of this test's conveyor_app"
    )


@pytest.fixture
def conveyor_app(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Conveyor]:
    """An installed app on a database of this test's own, the default app while the test runs."""
    marker = request.node.get_closest_marker("conveyor")
    settings: dict[str, Any] = dict(marker.kwargs) if marker is not None else {}
    testing = settings.pop("testing", None) or request.config.getini(MODE_OPTION) or "manual"
    url = os.environ.get(DATABASE_URL_VARIABLE) or request.config.getini(DATABASE_URL_OPTION)
    schema = None  # the schema (database) this fixture makes and drops: not one the marker names
    if url and (is_mysql_url(url) or is_postgres_url(url)):
        if "prefix" not in settings:
            schema = settings["prefix"] = f"conveyor_pytest_{uuid.uuid4().hex[:12]}"
    elif not url:
        url = f"sqlite:///{tmp_path / 'conveyor.db'}"
    app = Conveyor(url, testing=testing, **settings)
    previous = default_app()
    try:
        app.install_sync()  # inside: a schema half made by a failed install is dropped too
        set_default_app(app)
        yield app
    finally:
        set_default_app(previous)
        app.close_sync()
        if schema is not None:
            (_drop_database if is_mysql_url(url) else _drop_schema)(url, schema)


def _drop_schema(url: str, schema: str) -> None:
    import psycopg

    from conveyor.engine.postgres.dsn import check

    with psycopg.connect(check(url), autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'.encode())


def _drop_database(url: str, database: str) -> None:
    """Drop the database a test's app made on a MySQL/MariaDB server, through the engine's driver
    on a thread of its own (the test's event loop, if any, is left alone)."""
    from conveyor.engine.mysql.address import parse
    from conveyor.engine.mysql.connect import connect

    async def drop() -> None:
        conn = await connect(parse(url))
        try:
            async with conn.cursor() as cursor:
                await cursor.execute(f"DROP DATABASE IF EXISTS `{database}`")
        finally:
            conn.close()

    failed: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(drop())
        except BaseException as exc:
            failed.append(exc)

    thread = threading.Thread(target=run, name="conveyor-pytest-drop")
    thread.start()
    thread.join()
    if failed:
        raise failed[0]
