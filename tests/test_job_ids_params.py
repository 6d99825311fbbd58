"""What ``enqueue_many`` returns goes into a query wherever a list of ints did: psycopg (sync and
async, ``%s``, ``%t``, ``%b``), asyncpg, SQLAlchemy, sqlite3 and aiosqlite."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import aiosqlite
import asyncpg
import psycopg
import pytest
from sqlalchemy import bindparam, create_engine, text

from conveyor import Conveyor, JobRequest
from conveyor.job_ids import JobIds

UNIQUE = {"period": None}


async def enqueued(app: Conveyor) -> JobIds:
    """Ids of new jobs and of a conflict, in one ``JobIds``."""
    (first,) = await app.enqueue_many([JobRequest("tests.p.Job", args={"n": 0}, unique=UNIQUE)])
    ids = await app.enqueue_many(
        [JobRequest("tests.p.Job", args={"n": n}, unique=UNIQUE) for n in range(3)]
        + [JobRequest("tests.p.Job", args={"plain": n}) for n in range(2)]
    )
    assert type(ids) is JobIds and ids[0] == first and ids[0].conflict
    return ids


async def test_psycopg_takes_job_ids_as_an_array(app: Conveyor, dsn: str, prefix: str) -> None:
    ids = await enqueued(app)
    query = f'SELECT id FROM "{prefix}".oban_jobs WHERE id = ANY(%s) ORDER BY id'.encode()
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        cur = await conn.execute(query, (ids,))
        assert [row[0] for row in await cur.fetchall()] == sorted(ids)
        cur = await conn.execute(b"SELECT %t, %b, %s, pg_typeof(%s)::text", (ids, ids, ids[2:], JobIds()))
        assert await cur.fetchone() == (ids.tolist(), ids.tolist(), ids[2:].tolist(), "bigint[]")
    with psycopg.connect(dsn) as sync_conn:
        found = sync_conn.execute(query, (ids,)).fetchall()
        assert [row[0] for row in found] == sorted(ids)
        assert sync_conn.execute(b"SELECT %s::bigint[]", (JobIds(),)).fetchone() == ([],)


async def test_asyncpg_and_sqlalchemy_take_job_ids(app: Conveyor, dsn: str, prefix: str) -> None:
    ids = await enqueued(app)
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(f'SELECT id FROM "{prefix}".oban_jobs WHERE id = ANY($1) ORDER BY id', ids)
        assert [row[0] for row in rows] == sorted(ids)
    finally:
        await conn.close()
    engine = create_engine(dsn.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with engine.connect() as sa:
            any_of = text(f'SELECT id FROM "{prefix}".oban_jobs WHERE id = ANY(:ids) ORDER BY id')
            assert list(sa.execute(any_of, {"ids": ids}).scalars()) == sorted(ids)
            in_ = text(f'SELECT id FROM "{prefix}".oban_jobs WHERE id IN :ids ORDER BY id').bindparams(
                bindparam("ids", expanding=True)
            )
            assert list(sa.execute(in_, {"ids": ids}).scalars()) == sorted(ids)
    finally:
        engine.dispose()


async def test_sqlite_takes_job_ids_as_parameters(tmp_path: Path) -> None:
    app = Conveyor(f"sqlite:///{tmp_path / 'ids.db'}")
    try:
        await app.install()
        ids = await enqueued(app)
        marks = ",".join("?" * len(ids))
        query = f"SELECT id FROM oban_jobs WHERE id IN ({marks}) ORDER BY id"
        with sqlite3.connect(tmp_path / "ids.db") as conn:
            assert [row[0] for row in conn.execute(query, ids)] == sorted(ids)
        async with aiosqlite.connect(tmp_path / "ids.db") as aconn:
            cursor = await aconn.execute(query, ids)
            assert [row[0] for row in await cursor.fetchall()] == sorted(ids)
    finally:
        await app.close()


def test_job_ids_made_before_psycopg_is_imported_are_adapted_once_it_is(dsn: str) -> None:
    """``import conveyor`` does not import psycopg; a ``JobIds`` made once it is imported registers
    the dumpers (an application's own dumper for ``JobIds`` is kept)."""
    script = f"""
import sys
from conveyor.job_ids import JobIds
from conveyor.job import ExistingJobId
assert "psycopg" not in sys.modules
import psycopg
ids = JobIds([5, ExistingJobId(6)])
with psycopg.connect({dsn!r}) as conn:
    assert conn.execute("SELECT %s", (ids,)).fetchone() == ([5, 6],)
    assert conn.execute("SELECT 6 = ANY(%s)", (ids[1:],)).fetchone() == (True,)
"""
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)


def test_an_applications_own_dumper_is_kept() -> None:
    from conveyor import _psycopg_ids

    class Mine(_psycopg_ids.JobIdsTextDumper):
        pass

    adapters = psycopg.adapters
    before = adapters.get_dumper(JobIds, psycopg.adapt.PyFormat.AUTO)
    try:
        adapters.register_dumper(JobIds, Mine)
        _psycopg_ids.register()
        assert adapters.get_dumper(JobIds, psycopg.adapt.PyFormat.AUTO) is Mine
    finally:
        adapters.register_dumper(JobIds, before)


@pytest.mark.parametrize("count", [0, 1, 1000])
def test_both_dumpers_write_what_postgresql_reads(dsn: str, count: int) -> None:
    ids = JobIds(range(-(count // 2), count - count // 2))
    with psycopg.connect(dsn) as conn:
        assert conn.execute(b"SELECT %t::bigint[] = %b::bigint[], %b", (ids, ids, ids)).fetchone() == (
            True,
            ids.tolist(),
        )
