"""Fixtures: the service on the ``conveyor_app`` fixture's database (a SQLite file or a PostgreSQL
schema of the test's own), its tables created there, and an HTTP client for it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from conveyor import Conveyor
from docverse.db import Database, database_of
from docverse.web import create_api


@pytest.fixture
async def database(conveyor_app: Conveyor) -> AsyncIterator[Database]:
    database = database_of(conveyor_app)
    await database.create_tables()  # in the app's database and schema, next to Conveyor's tables
    yield database
    await database.dispose()  # before the plugin drops the schema


@pytest.fixture
async def api(conveyor_app: Conveyor, database: Database) -> AsyncIterator[FastAPI]:
    api = create_api(conveyor_app)
    async with api.router.lifespan_context(api):  # the app is in manual mode: no node starts
        yield api


@pytest.fixture
async def client(api: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=api)
    async with httpx.AsyncClient(transport=transport, base_url="http://docverse.test") as client:
        yield client
