"""conveyor.contrib.django in a real Django project (tests/django_project), on PostgreSQL and SQLite.

Each test runs ``manage.py`` in processes of its own, as a user would: Django's settings are global
to a process, and the two engines need two of them. A command, and the node (``conveyor_start``,
stopped by a signal), is forked from a server that imported Django's command machinery and Conveyor
once (``tests.forked``); the project's pytest run starts a new interpreter. On PostgreSQL the
project's tables and Conveyor's live in the test's own schema (``search_path`` in the database
OPTIONS); on SQLite in a file.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest

from conveyor.engine._migrations import LATEST_VERSION
from tests import forked
from tests.conftest import DSN
from tests.helpers import poll_sync

PROJECT = Path(__file__).resolve().parent / "django_project"
SRC = Path(__file__).resolve().parents[1] / "src"


class Project:
    """The test project on one engine: runs its manage.py and reads its database."""

    def __init__(self, engine: str, where: str) -> None:
        self.engine = engine
        self.where = where  # the SQLite file, or the PostgreSQL schema

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CONVEYOR_", "SHOP_", "DJANGO_"))}
        env["PYTHONPATH"] = os.pathsep.join([str(PROJECT), str(SRC)])
        env["SHOP_SQLITE" if self.engine == "sqlite" else "SHOP_PG_SCHEMA"] = self.where
        server = urlsplit(DSN)  # the server the tests use
        env |= {"SHOP_PG_HOST": server.hostname or "127.0.0.1", "SHOP_PG_PORT": str(server.port or 5432)}
        env["SHOP_PG_NAME"] = server.path.lstrip("/") or "test"
        return env | self.settings() | extra

    def settings(self) -> dict[str, str]:
        return {}

    def manage(self, *args: str, check: bool = True, **extra: str) -> subprocess.CompletedProcess[str]:
        done = forked.run_python(["manage.py", *args], cwd=PROJECT, env=self.env(**extra), timeout=120)
        if check:
            assert done.returncode == 0, f"manage.py {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
        return done

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        if self.engine == "sqlite":
            with sqlite3.connect(self.where) as conn:
                return list(conn.execute(sql).fetchall())
        with psycopg.connect(DSN, autocommit=True, options=f"-c search_path={self.where}") as conn:
            return list(conn.execute(sql.encode()).fetchall())

    def tables(self) -> set[str]:
        if self.engine == "sqlite":
            return {row[0] for row in self.query("SELECT name FROM sqlite_master WHERE type = 'table'")}
        rows = self.query(f"SELECT tablename FROM pg_tables WHERE schemaname = '{self.where}'")
        return {row[0] for row in rows}


@pytest.fixture(params=["postgres", "sqlite"])
def project(request: pytest.FixtureRequest, prefix: str, tmp_path: Path) -> Project:
    if request.param == "sqlite":
        return Project("sqlite", str(tmp_path / "shop.db"))
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{prefix}"'.encode())  # dropped by the prefix fixture
    return Project("postgres", prefix)


class ProjectUnderTest(Project):
    """The project as its own tests see it: a development database that is never created (PostgreSQL)
    or never written (SQLite), and the test database Django's runner (or pytest-django) makes."""

    def __init__(self, engine: str, where: str, test_database: str) -> None:
        super().__init__(engine, where)
        self.test_database = test_database

    def settings(self) -> dict[str, str]:
        manual = {"SHOP_CONVEYOR": '{"testing": "manual"}'}  # as docs/guides/django.md's test settings
        if self.engine == "sqlite":
            return manual | {"SHOP_SQLITE_TEST": self.test_database}
        return manual | {"SHOP_PG_DB": self.where, "SHOP_PG_SCHEMA": ""}

    def pytest(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", *args],
            cwd=PROJECT,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=180,
        )


@pytest.fixture(params=["postgres", "sqlite"])
def tested_project(request: pytest.FixtureRequest, prefix: str, tmp_path: Path) -> Iterator[ProjectUnderTest]:
    if request.param == "sqlite":
        yield ProjectUnderTest("sqlite", str(tmp_path / "dev.db"), str(tmp_path / "test.db"))
        return
    name = f"shop_{prefix}"
    yield ProjectUnderTest("postgres", name, f"test_{name}")
    with psycopg.connect(DSN, autocommit=True) as conn:  # the runners drop it; a failed run may not
        conn.execute(f'DROP DATABASE IF EXISTS "test_{name}" WITH (FORCE)'.encode())


def test_the_projects_own_tests_pass_under_djangos_runner_and_pytest_django(
    tested_project: ProjectUnderTest,
) -> None:
    """tests/django_project/shop/tests.py: the test database, assertions, drains and inline jobs."""
    django = tested_project.manage("test", "shop", "--noinput")
    assert "\nOK" in django.stderr, django.stderr
    assert "Traceback" not in django.stderr, django.stderr
    assert "destroyed but it is pending" not in django.stderr, django.stderr
    pytest_django = tested_project.pytest("shop")
    assert pytest_django.returncode == 0, pytest_django.stdout + pytest_django.stderr
    assert " passed" in pytest_django.stdout and "destroyed but it is pending" not in pytest_django.stderr
    # Both runners dropped their test database (nothing of Conveyor's held it open), and neither
    # touched the development one.
    if tested_project.engine == "postgres":
        with psycopg.connect(DSN, autocommit=True) as conn:
            names = {row[0] for row in conn.execute(b"SELECT datname FROM pg_database").fetchall()}
        assert tested_project.where not in names and tested_project.test_database not in names
    else:
        assert not Path(tested_project.where).exists()  # never created: nothing opened it


def test_migrate_installs_the_schema_and_enqueues_join_djangos_transactions(project: Project) -> None:
    project.manage("migrate", "--verbosity", "0")
    assert {"oban_jobs", "conveyor_migrations", "shop_order"} <= project.tables()
    assert project.query("SELECT max(version) FROM conveyor_migrations") == [(LATEST_VERSION,)]
    out = project.manage("shop_scenario").stdout.splitlines()
    assert out == [
        "committed: orders=1 jobs=1",
        "rolled back: orders=1 jobs=1",  # the order and its job went together
        "bulk rolled back: orders=1 jobs=1",
        "bulk committed: orders=301 jobs=301",
        "autocommit: orders=302 jobs=302",
    ]
    # Running migrate again (or on a schema Conveyor installed itself) changes nothing.
    project.manage("migrate", "--verbosity", "0")
    assert project.query("SELECT count(*) FROM oban_jobs") == [(302,)]


def test_conveyor_start_runs_the_jobs_with_the_orm(project: Project, tmp_path: Path) -> None:
    project.manage("migrate", "--verbosity", "0")
    project.manage("shop_scenario")
    log = tmp_path / "node.log"
    node = forked.start_python(
        ["manage.py", "conveyor_start", "--log-level", "WARNING"], cwd=PROJECT, env=project.env(), output=log
    )
    try:

        def fulfilled() -> list[tuple[Any, ...]]:
            assert node.poll() is None, log.read_text()
            return project.query("SELECT count(*) FROM shop_order WHERE status = 'fulfilled'")

        poll_sync(
            fulfilled, lambda rows: rows == [(302,)], timeout=60, what="302 fulfilled orders", every=0.2
        )
        node.send_signal(signal.SIGTERM)
        node.wait(30)
    finally:
        if node.poll() is None:
            node.kill()
            node.wait()
    err = log.read_text()
    assert node.returncode == 0, err
    assert "running queues shop:2" in err
    assert project.query("SELECT state, count(*) FROM oban_jobs GROUP BY state") == [("completed", 302)]
    # Blocking jobs ran in the node's threads, each with the ORM.
    runners = {row[0] for row in project.query("SELECT DISTINCT fulfilled_by FROM shop_order")}
    assert runners and all(name.startswith("conveyor-job") for name in runners), runners


def test_migrating_to_zero_drops_the_schema_and_conveyor_install_brings_it_back(project: Project) -> None:
    project.manage("migrate", "--verbosity", "0")
    project.manage("migrate", "conveyor", "zero", "--verbosity", "0")
    assert "oban_jobs" not in project.tables() and "shop_order" in project.tables()
    sql = project.manage("conveyor_install", "--print-sql").stdout
    assert "oban_jobs" in sql and "CREATE" in sql
    assert "oban_jobs" not in project.tables()  # printing changes nothing
    out = project.manage("conveyor_install").stdout
    assert out.strip() == f"conveyor schema at version {LATEST_VERSION}"
    assert "oban_jobs" in project.tables()


def test_bad_settings_are_refused_naming_the_setting(tmp_path: Path) -> None:
    # Settings are checked before any database is touched: one engine shows it (the schema check
    # below, which does touch it, runs on both).
    project = Project("sqlite", str(tmp_path / "shop.db"))
    bad_queue = project.manage("check", check=False, SHOP_CONVEYOR='{"queues": {"shop": -1}}')
    assert bad_queue.returncode != 0
    assert "ImproperlyConfigured: settings.CONVEYOR:" in bad_queue.stderr and "shop" in bad_queue.stderr
    unknown = project.manage("check", check=False, SHOP_CONVEYOR='{"queue": {"shop": 1}}')
    assert "settings.CONVEYOR" in unknown.stderr and "unknown setting" in unknown.stderr
    assert "also takes the Django integration's dashboard, database, database_url, make_default" in (
        unknown.stderr
    )
    alias = project.manage("check", check=False, SHOP_CONVEYOR='{"database": "jobs"}')
    assert "settings.CONVEYOR['database'] = 'jobs' is not a database of settings.DATABASES" in alias.stderr
    no_queues = project.manage("conveyor_start", check=False, SHOP_CONVEYOR='{"queues": {}}')
    assert no_queues.returncode != 0
    assert "CommandError: no queues to run" in no_queues.stderr and "Traceback" not in no_queues.stderr
    bad_option = project.manage("conveyor_start", "--queues", "shop:0", check=False)
    assert bad_option.returncode != 0 and "Traceback" not in bad_option.stderr
    assert "CommandError: the command's options or settings.CONVEYOR: invalid queues.shop.limit=0" in (
        bad_option.stderr
    )


def test_a_node_on_an_unmigrated_database_says_to_migrate(project: Project) -> None:
    missing = project.manage("conveyor_start", check=False)
    assert missing.returncode != 0 and "Traceback" not in missing.stderr
    assert "CommandError: Conveyor's schema is not ready: run `manage.py migrate`" in missing.stderr


def test_an_in_memory_sqlite_database_is_refused(tmp_path: Path) -> None:
    memory = Project("sqlite", ":memory:").manage("check", check=False)
    assert memory.returncode != 0
    assert "Conveyor needs a SQLite file that every process opens" in memory.stderr


REFUSAL = """
from django.db import connection
from conveyor.contrib.django import get_app
from conveyor.filters import JobFilter
get_app().list_jobs_sync(JobFilter())  # the app's own connections, on the development database
connection.creation.create_test_db(verbosity=0)
try:
    get_app().list_jobs_sync(JobFilter())
except Exception as exc:
    print(type(exc).__name__, exc)
finally:
    get_app().close_sync()
    connection.creation.destroy_test_db("dev.db", verbosity=0)
"""


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> ProjectUnderTest:
    """The project on a migrated SQLite database, shared by the tests below (one migrate for all)."""
    where = tmp_path_factory.mktemp("shop")
    project = ProjectUnderTest("sqlite", str(where / "dev.db"), str(where / "test.db"))
    project.manage("migrate", "--verbosity", "0")
    return project


def test_an_app_already_on_the_development_database_refuses_the_test_database(
    migrated: ProjectUnderTest,
) -> None:
    project = migrated
    out = project.manage("shell", "-c", REFUSAL).stdout
    assert "ConveyorError Django's database 'default' is now " in out
    assert "refusing to use either" in out and "before Django sets up the test database" in out
    # Django's SQLite test database is in memory unless named: drains need a file, and say so.
    memory = project.manage("test", "shop.tests.DrainTests", check=False, SHOP_SQLITE_TEST="")
    assert memory.returncode != 0
    assert "Django's test database is in memory unless it has a file: set DATABASES['default']['TEST']" in (
        memory.stderr
    )


ASGI = """
import asyncio
from djproject.asgi import application

async def call(scope, messages):
    sent, inbox = [], list(messages)
    async def receive():
        if inbox:
            return inbox.pop(0)
        await asyncio.Event().wait()  # a client that stays connected
    async def send(message):
        sent.append(message)
    await application(scope, receive, send)
    return sent

async def main():
    http = {"type": "http", "method": "GET", "path": "/ops/", "root_path": "", "query_string": b"",
            "headers": [], "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 8000),
            "scheme": "http", "http_version": "1.1", "asgi": {"version": "3.0"}}
    page = await call(http, [{"type": "http.request", "body": b"", "more_body": False}])
    print("dashboard", page[0]["status"])
    django = await call(dict(http, path="/elsewhere"), [{"type": "http.request", "body": b""}])
    print("django", django[0]["status"])
    life = await call({"type": "lifespan"}, [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}])
    print(*[m["type"] for m in life])

asyncio.run(main())
"""


def test_the_documented_asgi_router_answers_lifespan_and_routes_the_dashboard(
    migrated: ProjectUnderTest,
) -> None:
    out = migrated.manage("shell", "-c", ASGI).stdout.splitlines()[-3:]
    assert out == ["dashboard 200", "django 404", "lifespan.startup.complete lifespan.shutdown.complete"]


MISUSES = """
from django.db import connection
from conveyor.contrib.django import get_app
from shop.jobs import fulfil
for attempt in (
    lambda: fulfil.enqueue_sync(order_id=1, conn=connection),
    lambda: get_app().enqueue_sync(fulfil.new(order_id=1), conn=connection),
):
    try:
        attempt()
    except Exception as exc:
        print(type(exc).__name__, exc)
"""

NO_APP = """
import django
from django.conf import settings
settings.configure(INSTALLED_APPS=["django.contrib.contenttypes"])
django.setup()
from conveyor import job

@job
def hello() -> None: ...

try:
    hello.enqueue_sync()
except Exception as exc:
    print(type(exc).__name__, exc)
"""


def test_misuses_get_errors_that_say_what_to_do_in_django(migrated: ProjectUnderTest) -> None:
    project = migrated
    conn_argument, django_conn = project.manage("shell", "-c", MISUSES).stdout.splitlines()[-2:]
    assert conn_argument.startswith("ValidationError invalid conn=")
    assert "is not an argument of shop.jobs.fulfil" in conn_argument
    assert ".options(conn=conn).enqueue_sync(...)" in conn_argument and "leave it out" in conn_argument
    assert django_conn.startswith("UnsupportedConnectionError cannot enqueue through a django.")
    assert "this is Django's connection: leave conn out" in django_conn
    assert project.query("SELECT count(*) FROM oban_jobs") == [(0,)]
    no_app = forked.run_python(["-c", NO_APP], cwd=Path.cwd(), env=project.env(), timeout=60)
    assert no_app.stdout.startswith("NoCurrentAppError no current Conveyor app"), no_app
    assert 'add "conveyor.contrib.django" to INSTALLED_APPS' in no_app.stdout
    # A URL of its own: the enqueues no longer join Django's transactions, and the check says so.
    url = f'{{"database_url": "sqlite:///{project.where}"}}'
    warned = project.manage("check", SHOP_CONVEYOR=url)
    assert "(conveyor.W001) settings.CONVEYOR['database_url'] is set" in warned.stderr + warned.stdout
    meant = url[:-1] + ', "transactional": false}'
    quiet = project.manage("check", SHOP_CONVEYOR=meant)
    assert "conveyor.W001" not in quiet.stderr + quiet.stdout
