"""Enqueueing inside the caller's transaction: psycopg connections and SQLAlchemy sessions.

The caller's commit makes the jobs visible and delivers the insert notification; their rollback leaves
neither. Each test also writes a row of its own in the same transaction, to prove the jobs share it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql
from sqlalchemy import create_engine, text
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
from sqlalchemy.orm import Session

from conveyor import Conveyor, JobRequest, UnsupportedConnectionError, job
from conveyor.engine.postgres import schema
from tests.helpers import CHUNK, count_jobs, insert_channel, listening, listening_sync, table

CHUNK_PLUS = CHUNK + 500  # more than one insert chunk
TWO_CHUNKS_THEN = 2 * CHUNK + 10  # two chunks are written before the third is built


@job(queue="txn")
async def side_effect(n: int) -> None:
    pass


def alchemy_url(dsn: str) -> str:
    return dsn.replace("postgresql://", "postgresql+psycopg://", 1)


@pytest.fixture
def installed(dsn: str, prefix: str) -> str:
    """The schema installed with plain psycopg, plus a ``notes`` table the caller writes to."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(schema.install_sql(prefix).encode())
        conn.execute(sql.SQL("CREATE TABLE {} (note text NOT NULL)").format(table(prefix, "notes")))
    return prefix


@pytest.fixture
def sync_app(dsn: str, installed: str) -> Iterator[Conveyor]:
    app = Conveyor(dsn, prefix=installed)
    yield app
    app.close_sync()


def notes(dsn: str, prefix: str) -> list[str]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(sql.SQL("SELECT note FROM {} ORDER BY note").format(table(prefix, "notes")))
        return [r[0] for r in rows.fetchall()]


def note_sql(prefix: str, note: str) -> str:
    return f"INSERT INTO \"{prefix}\".notes (note) VALUES ('{note}')"


def many(count: int, then: BaseException | None = None) -> Iterator[JobRequest]:
    for n in range(count):
        yield side_effect.new(n=n)
    if then is not None:
        raise then


# -- psycopg ---------------------------------------------------------------------------------


@pytest.mark.parametrize("autocommit", [False, True])
async def test_psycopg_async_commit(app: Conveyor, dsn: str, prefix: str, autocommit: bool) -> None:
    await _notes_table(dsn, prefix)
    async with (
        listening(dsn, insert_channel(prefix)) as listener,
        await psycopg.AsyncConnection.connect(dsn, autocommit=autocommit) as conn,
    ):
        async with conn.transaction():
            await conn.execute(note_sql(prefix, "mine").encode())
            job_id = await app.enqueue(side_effect.new(n=1), conn=conn)
            assert count_jobs(dsn, prefix) == 0
            assert await listener.collect(0.2) == []
        assert await listener.first() == '{"queue": "txn"}'
    assert count_jobs(dsn, prefix) == 1
    assert notes(dsn, prefix) == ["mine"]
    found = await app.get_job(job_id)
    assert found is not None and found.args == {"n": 1}


async def test_psycopg_async_rollback(app: Conveyor, dsn: str, prefix: str) -> None:
    await _notes_table(dsn, prefix)
    async with (
        listening(dsn, insert_channel(prefix)) as listener,
        await psycopg.AsyncConnection.connect(dsn) as conn,
    ):
        await conn.execute(note_sql(prefix, "mine").encode())
        await app.enqueue(side_effect.new(n=1), conn=conn)
        await conn.rollback()
        assert await listener.collect(0.3) == []
    assert count_jobs(dsn, prefix) == 0
    assert notes(dsn, prefix) == []


async def test_psycopg_async_autocommit_outside_a_transaction_commits_at_once(
    app: Conveyor, dsn: str, prefix: str
) -> None:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        ids = await app.enqueue_many(many(CHUNK_PLUS), conn=conn)
        assert count_jobs(dsn, prefix) == CHUNK_PLUS == len(ids)
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


def test_psycopg_sync_commit(sync_app: Conveyor, dsn: str, installed: str) -> None:
    with listening_sync(dsn, insert_channel(installed)) as listener, psycopg.connect(dsn) as conn:
        conn.execute(note_sql(installed, "mine").encode())
        job_id = sync_app.enqueue_sync(side_effect.new(n=1), conn=conn)
        assert count_jobs(dsn, installed) == 0
        assert listener.collect(0.2) == []
        conn.commit()
        assert listener.first() == '{"queue": "txn"}'
    found = sync_app.get_job_sync(job_id)
    assert found is not None and found.queue == "txn"
    assert notes(dsn, installed) == ["mine"]


def test_psycopg_sync_rollback(sync_app: Conveyor, dsn: str, installed: str) -> None:
    with listening_sync(dsn, insert_channel(installed)) as listener, psycopg.connect(dsn) as conn:
        conn.execute(note_sql(installed, "mine").encode())
        sync_app.enqueue_many_sync([side_effect.new(n=1), side_effect.new(n=2)], conn=conn)
        conn.rollback()
        assert listener.collect(0.3) == []
    assert count_jobs(dsn, installed) == 0
    assert notes(dsn, installed) == []


# -- SQLAlchemy ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["session", "connection"])
def test_sqlalchemy_sync_commit_and_rollback(sync_app: Conveyor, dsn: str, installed: str, kind: str) -> None:
    engine = create_engine(alchemy_url(dsn))
    try:
        with listening_sync(dsn, insert_channel(installed)) as listener:
            with Session(engine) if kind == "session" else engine.connect() as conn:
                conn.execute(text(note_sql(installed, "rolled-back")))
                sync_app.enqueue_sync(side_effect.new(n=1), conn=conn)
                conn.rollback()
            assert listener.collect(0.3) == []
            assert count_jobs(dsn, installed) == 0

            with Session(engine) if kind == "session" else engine.connect() as conn:
                conn.execute(text(note_sql(installed, "committed")))
                ids = sync_app.enqueue_many_sync([side_effect.new(n=2), side_effect.new(n=3)], conn=conn)
                assert count_jobs(dsn, installed) == 0
                conn.commit()
            assert listener.first() == '{"queue": "txn"}'
        assert count_jobs(dsn, installed) == 2
        assert notes(dsn, installed) == ["committed"]
        found = sync_app.get_job_sync(ids[1])
        assert found is not None and found.args == {"n": 3}
    finally:
        engine.dispose()


@pytest.mark.parametrize("kind", ["session", "connection"])
async def test_sqlalchemy_async_commit_and_rollback(app: Conveyor, dsn: str, prefix: str, kind: str) -> None:
    await _notes_table(dsn, prefix)
    engine = create_async_engine(alchemy_url(dsn))

    async def open_conn() -> Any:
        return AsyncSession(engine) if kind == "session" else engine.connect()

    try:
        async with listening(dsn, insert_channel(prefix)) as listener:
            async with await open_conn() as conn:
                await conn.execute(text(note_sql(prefix, "rolled-back")))
                await app.enqueue(side_effect.new(n=1), conn=conn)
                await conn.rollback()
            assert await listener.collect(0.3) == []
            assert count_jobs(dsn, prefix) == 0

            async with await open_conn() as conn:
                await conn.execute(text(note_sql(prefix, "committed")))
                ids = await app.enqueue_many([side_effect.new(n=2), side_effect.new(n=3)], conn=conn)
                assert count_jobs(dsn, prefix) == 0
                await conn.commit()
            assert await listener.first() == '{"queue": "txn"}'
        assert count_jobs(dsn, prefix) == 2
        assert notes(dsn, prefix) == ["committed"]
        found = await app.get_job(ids[0])
        assert found is not None and found.args == {"n": 2}
    finally:
        await engine.dispose()


# -- several chunks inside a caller's transaction --------------------------------------------


async def test_multi_chunk_rollback_leaves_nothing_async(app: Conveyor, dsn: str, prefix: str) -> None:
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        ids = await app.enqueue_many(many(CHUNK_PLUS), conn=conn)
        assert len(ids) == CHUNK_PLUS
        await conn.rollback()
    assert count_jobs(dsn, prefix) == 0


def test_multi_chunk_rollback_leaves_nothing_sync(sync_app: Conveyor, dsn: str, installed: str) -> None:
    with psycopg.connect(dsn) as conn:
        ids = sync_app.enqueue_many_sync(many(CHUNK_PLUS), conn=conn)
        assert len(ids) == CHUNK_PLUS
        conn.rollback()
    assert count_jobs(dsn, installed) == 0


async def test_multi_chunk_rollback_leaves_nothing_sqlalchemy(app: Conveyor, dsn: str, prefix: str) -> None:
    engine = create_async_engine(alchemy_url(dsn))
    try:
        async with AsyncSession(engine) as session:
            assert len(await app.enqueue_many(many(CHUNK_PLUS), conn=session)) == CHUNK_PLUS
            await session.rollback()
    finally:
        await engine.dispose()
    assert count_jobs(dsn, prefix) == 0


@pytest.mark.parametrize("autocommit", [False, True])
async def test_failed_multi_chunk_enqueue_keeps_callers_transaction_usable(
    app: Conveyor, dsn: str, prefix: str, autocommit: bool
) -> None:
    await _notes_table(dsn, prefix)
    async with (
        await psycopg.AsyncConnection.connect(dsn, autocommit=autocommit) as conn,
        conn.transaction(),
    ):
        await conn.execute(note_sql(prefix, "before").encode())
        kept = await app.enqueue(side_effect.new(n=-1), conn=conn)
        # Two chunks are written, then the source fails while the third is built.
        with pytest.raises(RuntimeError, match="source failed"):
            await app.enqueue_many(many(TWO_CHUNKS_THEN, RuntimeError("source failed")), conn=conn)
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        await conn.execute(note_sql(prefix, "after").encode())
    assert notes(dsn, prefix) == ["after", "before"]
    assert count_jobs(dsn, prefix) == 1
    assert await app.get_job(kept) is not None


def refuse_boom_jobs(dsn: str, prefix: str) -> None:
    """A trigger that makes the database itself refuse a job whose args are {"n": "boom"}."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            f"""
            CREATE FUNCTION "{prefix}".refuse_boom() RETURNS trigger AS $$
            BEGIN RAISE EXCEPTION 'boom refused'; END $$ LANGUAGE plpgsql;
            CREATE TRIGGER refuse_boom BEFORE INSERT ON "{prefix}".oban_jobs
            FOR EACH ROW WHEN (NEW.args->>'n' = 'boom') EXECUTE FUNCTION "{prefix}".refuse_boom();
            """.encode()
        )


def with_boom(count: int) -> Iterator[JobRequest]:
    yield from many(count)
    yield side_effect.new(n="boom")


async def test_database_error_in_a_later_chunk_keeps_callers_transaction_usable(
    app: Conveyor, dsn: str, prefix: str
) -> None:
    await _notes_table(dsn, prefix)
    refuse_boom_jobs(dsn, prefix)
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        await conn.execute(note_sql(prefix, "before").encode())
        with pytest.raises(psycopg.errors.RaiseException, match="boom refused"):
            await app.enqueue_many(with_boom(CHUNK_PLUS), conn=conn)
        # Not INERROR: only the savepoint was rolled back.
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        await conn.execute(note_sql(prefix, "after").encode())
        await app.enqueue(side_effect.new(n=1), conn=conn)
        await conn.commit()
    assert notes(dsn, prefix) == ["after", "before"]
    assert count_jobs(dsn, prefix) == 1


def test_database_error_in_a_later_chunk_keeps_callers_transaction_usable_sync(
    sync_app: Conveyor, dsn: str, installed: str
) -> None:
    refuse_boom_jobs(dsn, installed)
    with psycopg.connect(dsn) as conn:
        conn.execute(note_sql(installed, "before").encode())
        with pytest.raises(psycopg.errors.RaiseException, match="boom refused"):
            sync_app.enqueue_many_sync(with_boom(CHUNK_PLUS), conn=conn)
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        conn.execute(note_sql(installed, "after").encode())
        conn.commit()
    assert notes(dsn, installed) == ["after", "before"]
    assert count_jobs(dsn, installed) == 0


def test_failed_multi_chunk_enqueue_keeps_callers_transaction_usable_sync(
    sync_app: Conveyor, dsn: str, installed: str
) -> None:
    with psycopg.connect(dsn) as conn:
        conn.execute(note_sql(installed, "before").encode())
        kept = sync_app.enqueue_sync(side_effect.new(n=-1), conn=conn)
        with pytest.raises(RuntimeError, match="source failed"):
            sync_app.enqueue_many_sync(many(TWO_CHUNKS_THEN, RuntimeError("source failed")), conn=conn)
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        conn.execute(note_sql(installed, "after").encode())
        conn.commit()
    assert notes(dsn, installed) == ["after", "before"]
    assert count_jobs(dsn, installed) == 1
    assert sync_app.get_job_sync(kept) is not None


def test_failed_multi_chunk_enqueue_keeps_sqlalchemy_session_usable(
    sync_app: Conveyor, dsn: str, installed: str
) -> None:
    engine = create_engine(alchemy_url(dsn))
    try:
        with Session(engine) as session:
            session.execute(text(note_sql(installed, "before")))
            with pytest.raises(RuntimeError, match="source failed"):
                sync_app.enqueue_many_sync(many(TWO_CHUNKS_THEN, RuntimeError("source failed")), conn=session)
            session.execute(text(note_sql(installed, "after")))
            sync_app.enqueue_sync(side_effect.new(n=1), conn=session)
            session.commit()
    finally:
        engine.dispose()
    assert notes(dsn, installed) == ["after", "before"]
    assert count_jobs(dsn, installed) == 1


def test_failed_multi_chunk_enqueue_on_autocommit_connection_writes_nothing(
    sync_app: Conveyor, dsn: str, installed: str
) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        with pytest.raises(RuntimeError, match="source failed"):
            sync_app.enqueue_many_sync(many(TWO_CHUNKS_THEN, RuntimeError("source failed")), conn=conn)
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert count_jobs(dsn, installed) == 0


# -- unsupported connections -----------------------------------------------------------------


async def test_unsupported_connection_objects_are_refused(app: Conveyor, dsn: str, prefix: str) -> None:
    for bad in (object(), "postgresql://localhost/db", 42):
        with pytest.raises(UnsupportedConnectionError) as exc:
            await app.enqueue(side_effect.new(n=1), conn=bad)
        assert exc.value.connection is bad
    # A blocking connection cannot serve the async API, nor an async one the blocking API.
    with psycopg.connect(dsn) as sync_conn, pytest.raises(UnsupportedConnectionError):
        await app.enqueue(side_effect.new(n=1), conn=sync_conn)
    async with await psycopg.AsyncConnection.connect(dsn) as async_conn:
        with pytest.raises(UnsupportedConnectionError) as exc:
            app.enqueue_many_sync([side_effect.new(n=1)], conn=async_conn)
        assert "psycopg.Connection" in str(exc.value)
    # Nor can a blocking SQLAlchemy session.
    engine = create_engine(alchemy_url(dsn))
    try:
        with Session(engine) as session, pytest.raises(UnsupportedConnectionError):
            await app.enqueue(side_effect.new(n=1), conn=session)
    finally:
        engine.dispose()
    assert count_jobs(dsn, prefix) == 0


# -- helpers ---------------------------------------------------------------------------------


async def _notes_table(dsn: str, prefix: str) -> None:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute(sql.SQL("CREATE TABLE {} (note text NOT NULL)").format(table(prefix, "notes")))


# -- managing jobs inside a caller's transaction ---------------------------------------------


async def test_cancel_retry_delete_join_a_sqlalchemy_session(app: Conveyor, dsn: str, prefix: str) -> None:
    """A web request that replaces a job: cancel the old one and enqueue the new in its session."""
    await app.install()
    old, done = await app.enqueue_many([side_effect.new(n=1), side_effect.new(n=2)])
    assert await app.cancel_jobs(ids=[done]) == [done]
    engine = create_async_engine(alchemy_url(dsn))
    try:
        async with AsyncSession(engine) as session:
            assert await app.cancel_jobs(ids=[old], conn=session) == [old]
            assert await app.retry_jobs(ids=[done], conn=session) == [done]
            await session.rollback()
        assert [j.state.value for j in await app.list_jobs(ids=[old, done])] == ["cancelled", "available"]
        async with AsyncSession(engine) as session:
            assert await app.cancel_jobs(ids=[old], conn=session) == [old]
            new = await app.enqueue(side_effect.new(n=3), conn=session)
            assert await app.delete_jobs(ids=[done], conn=session) == [done]
            await session.commit()
        assert [j.state.value for j in await app.list_jobs(ids=[old, done, new])] == [
            "available",
            "cancelled",
        ]
    finally:
        await engine.dispose()


def test_sync_twins_refuse_a_blocking_connection_clearly(sync_app: Conveyor, dsn: str) -> None:
    with psycopg.connect(dsn) as conn, pytest.raises(UnsupportedConnectionError, match="AsyncConnection"):
        sync_app.cancel_jobs_sync(ids=[1], conn=conn)


def test_unique_jobs_through_a_blocking_connection(sync_app: Conveyor, dsn: str, installed: str) -> None:
    request = side_effect.new(n=1).with_options(unique={"period": None})
    with psycopg.connect(dsn) as conn:
        first = sync_app.enqueue_sync(request, conn=conn)
        again = sync_app.enqueue_sync(request, conn=conn)  # the same transaction sees its own job
        assert again == first and again.conflict and not first.conflict
        conn.rollback()
    with psycopg.connect(dsn) as conn:
        kept = sync_app.enqueue_sync(request, conn=conn)
        assert not kept.conflict
        conn.commit()
    assert sync_app.enqueue_sync(request).conflict


async def test_an_enqueue_that_opens_a_sqlalchemy_connections_transaction_is_committed_with_it(
    app: Conveyor, sync_app: Conveyor, dsn: str, prefix: str
) -> None:
    """A SQLAlchemy Connection begins its transaction at its first statement. When that statement is
    ours, the caller's commit() must still commit the jobs (it once found no transaction and the
    jobs were rolled back with the connection)."""
    async_engine = create_async_engine(alchemy_url(dsn))
    engine = create_engine(alchemy_url(dsn))
    try:
        async with async_engine.connect() as conn:
            await app.enqueue(side_effect.new(n=1), conn=conn)
            await conn.commit()
        with engine.connect() as blocking:
            sync_app.enqueue_sync(side_effect.new(n=2), conn=blocking)
            blocking.commit()
        assert count_jobs(dsn, prefix) == 2
        async with async_engine.connect() as conn:
            await app.enqueue(side_effect.new(n=3), conn=conn)
            await conn.rollback()
        assert count_jobs(dsn, prefix) == 2
    finally:
        await async_engine.dispose()
        engine.dispose()


async def test_a_subclass_of_a_sqlalchemy_session_is_accepted(app: Conveyor, dsn: str, prefix: str) -> None:
    """Sessions made by async_sessionmaker(class_=...) (SQLModel's AsyncSession is one) are sessions."""

    class AppSession(AsyncSession):
        pass

    engine = create_async_engine(alchemy_url(dsn))
    try:
        async with AppSession(engine) as session:
            await app.enqueue(side_effect.new(n=1), conn=session)
            await session.commit()
        assert count_jobs(dsn, prefix) == 1
    finally:
        await engine.dispose()
