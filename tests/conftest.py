"""Shared fixtures: every test gets its own PostgreSQL schema (prefix), empty or freshly installed."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Iterator

# Compiled modules are written and reused, whatever the environment says (PYTHONDONTWRITEBYTECODE):
# the suite starts a few hundred Python subprocesses (`conveyor` commands, nodes, pool workers,
# oban-py), and each one compiling Conveyor's hundred modules from source again costs it about
# 0.3 s of CPU; pytest's workers likewise re-rewrite every test module. The files land in
# __pycache__ directories, which git ignores. Set before Conveyor is first imported below.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

import pytest  # noqa: E402

from conveyor import Conveyor  # noqa: E402
from conveyor.engine.postgres import PostgresEngine  # noqa: E402
from tests.spare_schemas import SpareSchemas  # noqa: E402

# The Django project's own tests run under its runners (manage.py test, pytest-django with its
# pytest.ini), started by tests/test_django.py; collected here they would import Django unconfigured.
collect_ignore = ["django_project"]

pytest_plugins = ["tests.teardown_watchdog", "tests.worker_gc"]

DSN = os.environ.get("CONVEYOR_TEST_DSN", "postgresql://postgres@127.0.0.1:5432/test")


@pytest.fixture
def dsn() -> str:
    return DSN


#: Installed schemas a finished test left for the next test of this process (tests/spare_schemas.py).
SPARES = SpareSchemas(DSN)


@pytest.fixture(scope="session", autouse=True)
def _drop_spare_test_schemas() -> Iterator[None]:
    yield
    SPARES.drop_all()


@pytest.fixture
def prefix(request: pytest.FixtureRequest) -> Iterator[str]:
    """A schema name unique to this test, dropped afterwards with everything in it. A test that
    asks for ``engine`` (which installs the schema anyway) may get a schema a finished test left
    installed and emptied, its definitions unchanged (``SpareSchemas``)."""
    name = SPARES.take() if "engine" in request.fixturenames else SPARES.new_name()
    yield name
    SPARES.release(name)


@pytest.fixture
async def engine(prefix: str) -> AsyncIterator[PostgresEngine]:
    engine = PostgresEngine(DSN, prefix=prefix, max_connections=4)
    await engine.open()
    await engine.install()
    SPARES.installed(prefix)
    yield engine
    await engine.close()


@pytest.fixture
async def app(engine: PostgresEngine) -> AsyncIterator[Conveyor]:
    app = Conveyor(engine=engine)
    yield app
    await app.close()
