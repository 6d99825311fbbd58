"""SQLite: a one-job insert is written in the event loop's own thread when the writer is free at
once (``Database.write_now``), and otherwise waits on the writer thread as before: the loop never
sleeps through another process's write transaction, and listeners hear the insert either way."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from conveyor import JobRequest
from conveyor.engine.sqlite import SqliteEngine
from tests.conformance.contract import listening, settle
from tests.helpers import poll


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[SqliteEngine]:
    engine = SqliteEngine(tmp_path / "now.db")
    await engine.open()
    await engine.install()
    yield engine
    await engine.close()


async def test_a_single_insert_waits_for_another_writer_off_the_loop(
    engine: SqliteEngine, tmp_path: Path
) -> None:
    other = sqlite3.connect(tmp_path / "now.db", isolation_level=None)  # another process's writer
    try:
        other.execute("BEGIN IMMEDIATE")
        insert = asyncio.create_task(engine.insert([JobRequest("a.b", args={"n": 1})]))
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while not insert.done():
                ticks += 1
                await asyncio.sleep(0)

        ticker = asyncio.create_task(tick())
        # The loop goes on running other tasks while the insert waits for the file's lock.
        await poll(lambda: ticks, lambda n: n >= 50, what="the loop to run while the insert waits")
        assert not insert.done()
        other.execute("COMMIT")
        (job_id,) = await insert
        await ticker
    finally:
        other.close()
    job = await engine.get_job(job_id)
    assert job is not None and job.args == {"n": 1} and job.state == "available"


async def test_a_single_insert_in_the_loops_thread_wakes_listeners(engine: SqliteEngine) -> None:
    async with listening(engine, ["insert", "signal"]) as heard:
        await settle(engine, heard, marker=-1)
        heard.items.clear()
        (job_id,) = await engine.insert([JobRequest("a.b", queue="q1")])
        await heard.wait_for("insert", {"queue": "q1"})
    assert await engine.get_job(job_id) is not None
