"""SQLite: enqueueing inside a caller's transaction that began deferred and has read (issue 31.20).

SQLite's own rule: such a transaction cannot take the write lock once another connection has written
since its first read (SQLITE_BUSY_SNAPSHOT), and does not wait for it. The enqueue raises
``CallerTransactionLockedError`` naming the cause and the fix (BEGIN IMMEDIATE), not a bare
"database is locked"; with BEGIN IMMEDIATE the same transaction enqueues."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import aiosqlite
import pytest

from conveyor import Conveyor, JobFilter, JobRequest
from conveyor.errors import CallerTransactionLockedError


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[Conveyor]:
    app = Conveyor(f"sqlite:///{tmp_path / 'locks.db'}")
    await app.install()
    yield app
    await app.close()


async def test_a_deferred_transaction_that_read_gets_the_cause_and_the_fix(
    app: Conveyor, tmp_path: Path
) -> None:
    caller = sqlite3.connect(tmp_path / "locks.db", isolation_level=None, timeout=0.5)
    try:
        caller.execute("BEGIN")  # deferred
        assert caller.execute("SELECT count(*) FROM oban_jobs").fetchone() == (0,)
        await app.enqueue(JobRequest("a.b"))  # another connection writes after that read
        with pytest.raises(CallerTransactionLockedError, match="BEGIN IMMEDIATE") as raised:
            app.enqueue_sync(JobRequest("a.c"), conn=caller)
        assert isinstance(raised.value, sqlite3.OperationalError)  # still what sqlite3 code catches
        assert "wrote to the database after your transaction first read" in str(raised.value)
        assert "database is locked" in str(raised.value.__cause__)
        assert caller.in_transaction  # the caller's transaction is still theirs to end
        caller.execute("ROLLBACK")
        # The fix: BEGIN IMMEDIATE, then read and enqueue in the same transaction.
        caller.execute("BEGIN IMMEDIATE")
        caller.execute("SELECT count(*) FROM oban_jobs").fetchone()
        app.enqueue_sync(JobRequest("a.d"), conn=caller)
        caller.execute("COMMIT")
    finally:
        caller.close()
    workers = sorted(j.worker for j in await app.list_jobs(JobFilter()))
    assert workers == ["a.b", "a.d"]


async def test_the_same_for_an_aiosqlite_connection(app: Conveyor, tmp_path: Path) -> None:
    async with aiosqlite.connect(tmp_path / "locks.db", isolation_level=None, timeout=0.5) as caller:
        await caller.execute("BEGIN")
        await (await caller.execute("SELECT count(*) FROM oban_jobs")).fetchone()
        await app.enqueue(JobRequest("a.b"))
        with pytest.raises(CallerTransactionLockedError, match="BEGIN IMMEDIATE"):
            await app.enqueue(JobRequest("a.c"), conn=caller)
        await caller.execute("ROLLBACK")
    assert [j.worker for j in await app.list_jobs(JobFilter())] == ["a.b"]
