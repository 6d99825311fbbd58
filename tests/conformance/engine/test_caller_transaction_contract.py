"""The caller's-transaction contract: ``insert``, ``cancel_jobs``, ``retry_jobs`` and ``delete_jobs``
given ``conn`` (an application's own connection) join its transaction. Their changes, and the
notifications they cause, appear when the caller commits and vanish when it rolls back.

While the caller's transaction is open the tests only read through the engine: on SQLite the caller
holds the one write lock until it commits, so an engine write would wait for it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from conveyor import JobFilter, JobState
from conveyor.engine.base import Engine
from tests.conformance.contract import T0, Heard, job, put, req, settle


@pytest.fixture
async def heard(any_engine: Engine) -> AsyncIterator[Heard]:
    heard = Heard()
    listener = await any_engine.listen(["insert", "signal"], heard)
    try:
        await heard.wait_for("listener", {"event": "connected"})
        yield heard
    finally:
        await listener.stop()


async def expect(engine: Engine, heard: Heard, channel: str, payload: dict[str, Any], sent: bool) -> None:
    """After a commit the notification arrives (another process's would too: it travels through
    the database); after a rollback it never does."""
    if sent:
        await heard.wait_for(channel, payload)
    else:
        await settle(engine, heard)
        assert payload not in heard.on(channel)


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "rollback"])
async def test_insert_joins_the_callers_transaction(
    any_engine: Engine, caller_conn: Any, heard: Heard, commit: bool
) -> None:
    (job_id,) = await any_engine.insert([req(queue="joined")], conn=caller_conn, now=T0)
    assert await any_engine.get_job(job_id) is None  # not visible before the commit
    await (caller_conn.commit() if commit else caller_conn.rollback())
    await expect(any_engine, heard, "insert", {"queue": "joined"}, commit)
    assert (await any_engine.get_job(job_id) is not None) is commit


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "rollback"])
async def test_cancel_joins_the_callers_transaction(
    any_engine: Engine, caller_conn: Any, heard: Heard, commit: bool
) -> None:
    running = await put(any_engine, JobState.EXECUTING)
    waiting = await put(any_engine, JobState.AVAILABLE)
    cancelled = await any_engine.cancel_jobs(JobFilter(ids=(running, waiting)), now=T0, conn=caller_conn)
    assert cancelled == [running, waiting]
    assert (await job(any_engine, running)).state is JobState.EXECUTING
    await (caller_conn.commit() if commit else caller_conn.rollback())
    await expect(any_engine, heard, "signal", {"action": "pkill", "job_id": running}, commit)
    expected = JobState.CANCELLED if commit else JobState.EXECUTING
    assert (await job(any_engine, running)).state is expected
    assert (await job(any_engine, waiting)).state is (JobState.CANCELLED if commit else JobState.AVAILABLE)


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "rollback"])
async def test_retry_joins_the_callers_transaction(
    any_engine: Engine, caller_conn: Any, heard: Heard, commit: bool
) -> None:
    failed = await put(any_engine, JobState.DISCARDED, queue="again")
    await settle(any_engine, heard)
    heard.items.clear()  # its own insert's wake-up
    assert await any_engine.retry_jobs(JobFilter(ids=(failed,)), now=T0, conn=caller_conn) == [failed]
    assert (await job(any_engine, failed)).state is JobState.DISCARDED
    await (caller_conn.commit() if commit else caller_conn.rollback())
    await expect(any_engine, heard, "insert", {"queue": "again"}, commit)
    assert (await job(any_engine, failed)).state is (JobState.AVAILABLE if commit else JobState.DISCARDED)


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "rollback"])
async def test_delete_joins_the_callers_transaction(
    any_engine: Engine, caller_conn: Any, commit: bool
) -> None:
    done = await put(any_engine, JobState.COMPLETED)
    assert await any_engine.delete_jobs(JobFilter(ids=(done,)), conn=caller_conn) == [done]
    assert await any_engine.get_job(done) is not None
    await (caller_conn.commit() if commit else caller_conn.rollback())
    assert (await any_engine.get_job(done) is None) is commit


async def test_several_operations_share_one_transaction(any_engine: Engine, caller_conn: Any) -> None:
    """Enqueue a replacement and cancel the old job at once: both or neither."""
    old = await put(any_engine, JobState.AVAILABLE)
    (new,) = await any_engine.insert([req(args={"n": 2})], conn=caller_conn, now=T0)
    await any_engine.cancel_jobs(JobFilter(ids=(old,)), now=T0, conn=caller_conn)
    await caller_conn.rollback()
    assert await any_engine.get_job(new) is None
    assert (await job(any_engine, old)).state is JobState.AVAILABLE
    (new,) = await any_engine.insert([req(args={"n": 3})], conn=caller_conn, now=T0)
    await any_engine.cancel_jobs(JobFilter(ids=(old,)), now=T0, conn=caller_conn)
    await caller_conn.commit()
    assert (await job(any_engine, new)).state is JobState.AVAILABLE
    assert (await job(any_engine, old)).state is JobState.CANCELLED


async def test_a_failed_operation_leaves_the_callers_transaction_usable(
    any_engine: Engine, caller_conn: Any
) -> None:
    (kept,) = await any_engine.insert([req()], conn=caller_conn, now=T0)
    with pytest.raises(Exception, match="JobRequest"):
        await any_engine.insert([req(), "not a request"], conn=caller_conn, now=T0)  # type: ignore[list-item]
    await caller_conn.commit()
    assert await any_engine.get_job(kept) is not None
