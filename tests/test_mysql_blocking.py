"""The MySQL/MariaDB engine's blocking inserts (the optional role ``BlockingInserts``,
``engine/mysql/blocking.py``): ``MysqlEngine.insert``'s own code run in the caller's thread on
PyMySQL connections. What ``enqueue_sync`` makes of them on every engine is in
tests/conformance/app/test_blocking_enqueue_contract.py."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from conveyor.engine.mysql import MysqlEngine
from conveyor.engine.roles import BlockingInserts
from conveyor.errors import EngineClosedError
from conveyor.job_ids import ExistingJobId
from conveyor.request import JobRequest
from tests.conformance import mariadb

pytestmark = pytest.mark.skipif(mariadb.UNREACHABLE is not None, reason=mariadb.UNREACHABLE or "")


@pytest.fixture
async def engine() -> AsyncIterator[MysqlEngine]:
    async with mariadb.installed() as engine:
        yield engine


async def test_a_thread_inserts_unique_jobs_and_its_notification_comes_at_commit(engine: MysqlEngine) -> None:
    assert isinstance(engine, BlockingInserts)
    heard: list[Any] = []
    listener = await engine.listen(["insert"], lambda channel, payload: heard.append((channel, payload)))
    blocking = engine.blocking_inserts()
    try:
        once = JobRequest("tests.w", queue="mail", args={"n": 1}).with_options(unique={"period": None})
        (first,) = await asyncio.to_thread(blocking.insert, [once])
        # The thread has returned: its commit's notification is queued on this loop before this task.
        assert ("insert", {"queue": "mail"}) in heard
        (again,) = await asyncio.to_thread(blocking.insert, [once])
        assert isinstance(again, ExistingJobId) and again.conflict and again == first
        job = await engine.get_job(first)
        assert job is not None and job.args == {"n": 1} and job.state == "available"
    finally:
        blocking.close()
        blocking.close()  # twice: harmless
        await listener.stop()


async def test_a_closed_engine_refuses_blocking_inserts(engine: MysqlEngine) -> None:
    blocking = engine.blocking_inserts()
    await engine.close()
    try:
        with pytest.raises(EngineClosedError):
            await asyncio.to_thread(blocking.insert, [JobRequest("tests.w")])
    finally:
        blocking.close()
