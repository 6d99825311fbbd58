"""Shared fixtures: every test gets its own PostgreSQL schema (prefix), installed fresh."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator

import psycopg
import pytest

from conveyor import Conveyor
from conveyor.engine.postgres import PostgresEngine

# The Django project's own tests run under its runners (manage.py test, pytest-django with its
# pytest.ini), started by tests/test_django.py; collected here they would import Django unconfigured.
collect_ignore = ["django_project"]

DSN = os.environ.get("CONVEYOR_TEST_DSN", "postgresql://postgres@127.0.0.1:5432/test")


@pytest.fixture
def dsn() -> str:
    return DSN


@pytest.fixture
def prefix() -> Iterator[str]:
    """A schema name unique to this test, dropped afterwards with everything in it."""
    name = f"conveyor_test_{uuid.uuid4().hex[:10]}"
    yield name
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE'.encode())


@pytest.fixture
async def engine(prefix: str) -> AsyncIterator[PostgresEngine]:
    engine = PostgresEngine(DSN, prefix=prefix, max_connections=4)
    await engine.open()
    await engine.install()
    yield engine
    await engine.close()


@pytest.fixture
async def app(engine: PostgresEngine) -> AsyncIterator[Conveyor]:
    app = Conveyor(engine=engine)
    yield app
    await app.close()
