"""The MySQL/MariaDB engine's same-process fan-out (``engine/mysql/fanout.py``): a notification
reaches the listeners of the process that sent it when its transaction commits, not a poll later,
and once only when the poll reads its row; a rollback sends nothing; a caller's transaction
(``conn=``) reaches them by the poll. What every engine does with notifications is in
tests/conformance/engine/test_notifications_contract.py."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from conveyor.engine.mysql import MysqlEngine
from conveyor.engine.mysql.fanout import notify
from conveyor.request import JobRequest
from tests.conformance import mariadb
from tests.helpers import poll

pytestmark = pytest.mark.skipif(mariadb.UNREACHABLE is not None, reason=mariadb.UNREACHABLE or "")


class Boom(Exception):
    pass


@pytest.fixture
async def engine() -> AsyncIterator[MysqlEngine]:
    async with mariadb.installed() as engine:
        yield engine


def into(heard: list[Any]) -> Any:
    """A handler keeping the payloads heard (not the listener's own "connected")."""
    return lambda channel, payload: None if channel == "listener" else heard.append(payload)


async def through_the_poll(engine: MysqlEngine, heard: list[Any], queue: str) -> None:
    """Send ``{"queue": queue}`` in a caller's transaction (the poll alone delivers it) and wait
    for it: the poll, reading in id order, has then read every row written before it."""
    caller = (await mariadb.caller(engine)).conn
    try:
        async with caller.cursor() as cursor:
            await cursor.execute("SET SESSION sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES')")
            await notify(cursor, engine.files, "insert", {"queue": queue})
        await caller.commit()
    finally:
        caller.close()
    await poll(lambda: heard, lambda h: {"queue": queue} in h, what=f"{queue} through the poll")


async def test_a_notification_reaches_this_process_at_commit_and_once(engine: MysqlEngine) -> None:
    heard: list[Any] = []
    listener = await engine.listen(["insert"], into(heard))
    # Another engine of the process on the same database shares the fan-out.
    other = MysqlEngine(mariadb.URL, prefix=engine.prefix, max_connections=2)
    await other.open()
    try:
        await other.notify("insert", {"queue": "mail"})
        await asyncio.sleep(0)  # one turn of the loop: no poll can have come and gone
        assert heard == [{"queue": "mail"}]
        await engine.insert([JobRequest("tests.w", queue="jobs")])
        await asyncio.sleep(0)
        assert heard == [{"queue": "mail"}, {"queue": "jobs"}]
        await through_the_poll(engine, heard, "marker")
        assert heard == [{"queue": "mail"}, {"queue": "jobs"}, {"queue": "marker"}]  # not twice
    finally:
        await listener.stop()
        await other.close()


async def test_a_rolled_back_transaction_sends_nothing(engine: MysqlEngine) -> None:
    heard: list[Any] = []
    listener = await engine.listen(["insert"], into(heard))
    try:
        with pytest.raises(Boom):
            async with engine.transaction() as cursor:
                await notify(cursor, engine.files, "insert", {"queue": "never"})
                raise Boom
        await through_the_poll(engine, heard, "marker")
        assert heard == [{"queue": "marker"}]
    finally:
        await listener.stop()


async def test_a_listener_hears_only_its_channels_and_a_stopped_one_nothing(engine: MysqlEngine) -> None:
    inserts: list[Any] = []
    signals: list[Any] = []
    on_inserts = await engine.listen(["insert"], into(inserts))
    on_signals = await engine.listen(["signal"], into(signals))
    await on_signals.stop()
    try:
        await engine.notify("signal", {"action": "pkill", "job_id": 1})
        await engine.notify("insert", {"queue": "a"})
        await asyncio.sleep(0)
        assert inserts == [{"queue": "a"}] and signals == []
    finally:
        await on_inserts.stop()
