"""Enqueueing and managing jobs inside the caller's transaction on asyncpg: plain asyncpg
connections (and pooled ones) and SQLAlchemy sessions on ``postgresql+asyncpg``.

As with psycopg (tests/test_transactions.py): the caller's commit makes the jobs visible and
delivers the insert notification, a rollback leaves neither, and each test writes a row of its own in
the same transaction to prove the jobs share it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

from conveyor import Conveyor, JobRequest, Workflow, job
from conveyor.engine.postgres.asyncpg_session import translate
from tests.helpers import CHUNK, count_jobs, execute, insert_channel, listening

TWO_CHUNKS_THEN = 2 * CHUNK + 10


@job(queue="apg")
async def noted(n: Any) -> None:
    pass


@pytest.fixture
async def notes_table(app: Conveyor, dsn: str, prefix: str) -> str:
    """The app's schema installed, with a ``notes`` table the caller writes to."""
    await app.install()
    execute(dsn, f'CREATE TABLE "{prefix}".notes (note text NOT NULL)')
    return prefix


@pytest.fixture
async def conn(dsn: str, notes_table: str) -> AsyncIterator[asyncpg.Connection]:
    connection = await asyncpg.connect(dsn)
    try:
        yield connection
    finally:
        await connection.close()


def note(prefix: str, text_: str) -> str:
    return f"INSERT INTO \"{prefix}\".notes (note) VALUES ('{text_}')"


async def notes(conn: asyncpg.Connection, prefix: str) -> list[str]:
    return [row[0] for row in await conn.fetch(f'SELECT note FROM "{prefix}".notes ORDER BY note')]


def many(count: int, then: BaseException | None = None) -> Iterator[JobRequest]:
    for n in range(count):
        yield noted.new(n=n)
    if then is not None:
        raise then


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "rollback"])
async def test_an_asyncpg_transaction_carries_the_jobs(
    app: Conveyor, conn: asyncpg.Connection, dsn: str, prefix: str, commit: bool
) -> None:
    async with listening(dsn, insert_channel(prefix)) as listener:
        transaction = conn.transaction()
        await transaction.start()
        await conn.execute(note(prefix, "mine"))
        (one,) = await app.enqueue_many([noted.new(n=1)], conn=conn)
        ids = await app.enqueue_many([noted.new(n=2), noted.new(n=3)], conn=conn)
        assert count_jobs(dsn, prefix) == 0  # not visible before the commit
        await (transaction.commit() if commit else transaction.rollback())
        if commit:
            assert await listener.first() == '{"queue": "apg"}'
        else:
            assert await listener.collect(0.3) == []
    assert count_jobs(dsn, prefix) == (3 if commit else 0)
    assert await notes(conn, prefix) == (["mine"] if commit else [])
    if commit:
        found = await app.get_job(ids[1])
        assert found is not None and found.args == {"n": 3} and ids[0] > one


async def test_outside_a_transaction_the_jobs_commit_at_once(
    app: Conveyor, conn: asyncpg.Connection, dsn: str, prefix: str
) -> None:
    ids = await app.enqueue_many(many(3), conn=conn)
    assert not conn.is_in_transaction()
    assert count_jobs(dsn, prefix) == 3 and len(ids) == 3


async def test_a_manual_begin_is_joined_too(
    app: Conveyor, conn: asyncpg.Connection, dsn: str, prefix: str
) -> None:
    await conn.execute("BEGIN")
    await app.enqueue(noted.new(n=1), conn=conn)
    await conn.execute("ROLLBACK")
    assert count_jobs(dsn, prefix) == 0


async def test_a_batch_of_several_chunks_is_one_unit(
    app: Conveyor, conn: asyncpg.Connection, dsn: str, prefix: str
) -> None:
    async with conn.transaction():
        await conn.execute(note(prefix, "before"))
        kept = await app.enqueue(noted.new(n=-1), conn=conn)
        # Two chunks are written, then the source fails while the third is built: the savepoint
        # takes back the two, and the caller's transaction goes on.
        with pytest.raises(RuntimeError, match="source failed"):
            await app.enqueue_many(many(TWO_CHUNKS_THEN, RuntimeError("source failed")), conn=conn)
        assert conn.is_in_transaction()
        await conn.execute(note(prefix, "after"))
    assert await notes(conn, prefix) == ["after", "before"]
    assert count_jobs(dsn, prefix) == 1 and await app.get_job(kept) is not None
    # And a big batch outside a transaction is all or nothing on its own.
    with pytest.raises(RuntimeError, match="again"):
        await app.enqueue_many(many(TWO_CHUNKS_THEN, RuntimeError("again")), conn=conn)
    assert count_jobs(dsn, prefix) == 1


async def test_cancel_retry_delete_and_unique_jobs_join_the_transaction(
    app: Conveyor, conn: asyncpg.Connection, dsn: str, prefix: str
) -> None:
    old, done = await app.enqueue_many([noted.new(n=1), noted.new(n=2)])
    assert await app.cancel_jobs(ids=[done]) == [done]
    unique = noted.new(n="once").with_options(unique={"period": None})
    async with conn.transaction():
        assert await app.cancel_jobs(ids=[old], conn=conn) == [old]
        assert await app.retry_jobs(ids=[done], conn=conn) == [done]
        first = await app.enqueue(unique, conn=conn)
        again = await app.enqueue(unique, conn=conn)
        assert again == first
    states = {j.id: j.state.value for j in await app.list_jobs(ids=[old, done, first])}
    assert states == {old: "cancelled", done: "available", first: "available"}
    transaction = conn.transaction()
    await transaction.start()
    assert await app.delete_jobs(ids=[old, done], conn=conn) == [old, done]
    await transaction.rollback()
    assert count_jobs(dsn, prefix) == 3


async def test_a_workflow_is_enqueued_in_the_transaction(
    app: Conveyor, conn: asyncpg.Connection, dsn: str, prefix: str
) -> None:
    flow = Workflow().add("a", noted.new(n="a")).add("b", noted.new(n="b"), deps=["a"])
    transaction = conn.transaction()
    await transaction.start()
    await app.enqueue_many(flow, conn=conn)
    await transaction.rollback()
    assert count_jobs(dsn, prefix) == 0
    async with conn.transaction():
        a, b = await app.enqueue_many(flow, conn=conn)
    jobs = {j.id: j.state.value for j in await app.list_jobs(ids=[a, b])}
    assert jobs == {a: "available", b: "suspended"}


async def test_a_pooled_connection_works_as_well(app: Conveyor, dsn: str, notes_table: str) -> None:
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=2)
    try:
        async with pool.acquire() as pooled:
            async with pooled.transaction():
                await app.enqueue(noted.new(n=1), conn=pooled)
            tx = pooled.transaction()
            await tx.start()
            await app.enqueue(noted.new(n=2), conn=pooled)
            await tx.rollback()
    finally:
        await pool.close()
    assert count_jobs(dsn, notes_table) == 1


@pytest.mark.parametrize("kind", ["session", "connection"])
async def test_sqlalchemy_on_asyncpg(app: Conveyor, dsn: str, notes_table: str, kind: str) -> None:
    prefix = notes_table
    engine = create_async_engine(dsn.replace("postgresql://", "postgresql+asyncpg://", 1))

    async def open_conn() -> Any:
        return AsyncSession(engine) if kind == "session" else engine.connect()

    try:
        async with listening(dsn, insert_channel(prefix)) as listener:
            # The enqueue is the transaction's first statement: SQLAlchemy's adapter has not sent
            # BEGIN yet, and the jobs must still wait for the caller's commit.
            async with await open_conn() as session:
                await app.enqueue(noted.new(n=1), conn=session)
                assert count_jobs(dsn, prefix) == 0
                await session.execute(text(note(prefix, "rolled-back")))
                await session.rollback()
            assert await listener.collect(0.3) == []
            assert count_jobs(dsn, prefix) == 0

            async with await open_conn() as session:
                ids = await app.enqueue_many([noted.new(n=2), noted.new(n=3)], conn=session)
                await session.execute(text(note(prefix, "committed")))
                assert count_jobs(dsn, prefix) == 0
                await session.commit()
            assert await listener.first() == '{"queue": "apg"}'
        assert count_jobs(dsn, prefix) == 2
        found = await app.get_job(ids[0])
        assert found is not None and found.args == {"n": 2}

        # An AUTOCOMMIT connection commits each statement: the jobs are there at once.
        async with engine.connect() as autocommit:
            autocommit = await autocommit.execution_options(isolation_level="AUTOCOMMIT")
            await app.enqueue(noted.new(n=4), conn=autocommit)
            assert count_jobs(dsn, prefix) == 3
    finally:
        await engine.dispose()


def test_placeholders_translate_to_numbers() -> None:
    query, names = translate(b"SELECT %(a)s, %(b)s::jsonb, %(a)s, format('%%I', %(c)s)")
    assert query == "SELECT $1, $2::jsonb, $1, format('%I', $3)"
    assert names == ("a", "b", "c")
