"""conveyor.contrib.django in a real Django project (tests/django_project), on PostgreSQL and SQLite.

Each test runs ``manage.py`` in subprocesses, as a user would: Django's settings are global to a
process, and the two engines need two of them. On PostgreSQL the project's tables and Conveyor's
live in the test's own schema (``search_path`` in the database OPTIONS); on SQLite in a file.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

from conveyor.engine._migrations import LATEST_VERSION
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
        return env | extra

    def manage(self, *args: str, check: bool = True, **extra: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=PROJECT,
            env=self.env(**extra),
            capture_output=True,
            text=True,
            timeout=120,
        )
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


def test_conveyor_start_runs_the_jobs_with_the_orm(project: Project) -> None:
    project.manage("migrate", "--verbosity", "0")
    project.manage("shop_scenario")
    node = subprocess.Popen(
        [sys.executable, "manage.py", "conveyor_start", "--log-level", "WARNING"],
        cwd=PROJECT,
        env=project.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        def fulfilled() -> list[tuple[Any, ...]]:
            assert node.poll() is None, node.communicate()
            return project.query("SELECT count(*) FROM shop_order WHERE status = 'fulfilled'")

        poll_sync(
            fulfilled, lambda rows: rows == [(302,)], timeout=60, what="302 fulfilled orders", every=0.2
        )
        node.send_signal(signal.SIGTERM)
        _out, err = node.communicate(timeout=30)
    finally:
        if node.poll() is None:
            node.kill()
            node.wait()
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


def test_bad_settings_are_refused_naming_the_setting(project: Project) -> None:
    bad_queue = project.manage("check", check=False, SHOP_CONVEYOR='{"queues": {"shop": -1}}')
    assert bad_queue.returncode != 0
    assert "ImproperlyConfigured: settings.CONVEYOR:" in bad_queue.stderr and "shop" in bad_queue.stderr
    unknown = project.manage("check", check=False, SHOP_CONVEYOR='{"queue": {"shop": 1}}')
    assert "settings.CONVEYOR" in unknown.stderr and "unknown setting" in unknown.stderr
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
    # The schema is not there yet: the node says so and which command fixes it.
    missing = project.manage("conveyor_start", check=False)
    assert missing.returncode != 0 and "Traceback" not in missing.stderr
    assert "CommandError: Conveyor's schema is not ready: run `manage.py migrate`" in missing.stderr


def test_an_in_memory_sqlite_database_is_refused(tmp_path: Path) -> None:
    memory = Project("sqlite", ":memory:").manage("check", check=False)
    assert memory.returncode != 0
    assert "Conveyor needs a SQLite file that every process opens" in memory.stderr
