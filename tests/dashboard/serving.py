"""A real dashboard server for the browser tests: uvicorn on a free port in a thread of its own,
serving an app that also runs a node, over a fresh database of each engine (MariaDB's cases are
skipped, saying why, when no server answers: ``tests/conformance/mariadb.py``)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from conveyor import Conveyor
from conveyor.cron import CronEntry
from conveyor.web.dashboard.server import server
from tests.conformance import mariadb
from tests.conftest import DSN
from tests.helpers import poll_sync

ENGINE_NAMES = (
    "postgres",
    "sqlite",
    pytest.param(
        "mariadb",
        marks=pytest.mark.skipif(mariadb.UNREACHABLE is not None, reason=mariadb.UNREACHABLE or ""),
    ),
)
#: Fast enough for a browser to see a change within a second or two.
NODE_SETTINGS: dict[str, Any] = {
    "queues": {"default": 2},
    "poll_interval": 0.2,
    "stage_interval": 0.2,
    "heartbeat_interval": 0.3,
    "leadership": False,
}


@dataclass(frozen=True)
class Served:
    url: str
    #: The test's own app on the same database (enqueues and checks from the test's thread).
    client: Conveyor


@contextmanager
def database(engine: str, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(URL, prefix) of a fresh, empty database of ``engine``, dropped afterwards."""
    if engine == "sqlite":
        yield f"sqlite:///{tmp_path / 'dashboard.db'}", "public"
        return
    schema = f"dash_browser_{uuid.uuid4().hex[:10]}"
    if engine == "mariadb":  # a database of the server, made by install
        try:
            yield mariadb.URL, schema
        finally:
            mariadb.release(mariadb.TAG + schema)
        return
    try:
        yield DSN, schema
    finally:
        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'.encode())


@contextmanager
def dashboard_server(engine: str, tmp_path: Path, **options: Any) -> Iterator[Served]:
    with database(engine, tmp_path) as (url, prefix):
        client = Conveyor(url, prefix=prefix)
        client.install_sync()
        crontab = [
            CronEntry.build("*/10 * * * *", "tests.dashboard.dash_jobs.nap", {"seconds": 0}, name="tidy")
        ]
        node_app = Conveyor(url, prefix=prefix, crontab=crontab, **NODE_SETTINGS)
        found = server(node_app, host="127.0.0.1", port=0, refresh=0.5, **options)
        thread = threading.Thread(target=found.run, name="dashboard-server", daemon=True)
        thread.start()
        try:

            def started() -> bool:
                assert thread.is_alive(), "the dashboard server did not start"
                return bool(found.started)

            poll_sync(started, timeout=20, what="the dashboard server to start", every=0.05)
            port = found.servers[0].sockets[0].getsockname()[1]
            yield Served(f"http://127.0.0.1:{port}", client)
        finally:
            found.should_exit = True
            thread.join(20)
            client.close_sync()
