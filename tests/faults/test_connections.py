"""A node's share of the server's connection slots (issue 32.3): idle pools give connections back, an
engine opened on a server with no free slot waits (calmly) and recovers, and a pool that lost the
server says so in one line, and once more when it is back."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import psycopg
import pytest

from conveyor.engine.postgres import PostgresEngine, core
from tests.faults.cluster import PgCluster
from tests.faults.nodes import enqueue, fleet, wait_completed
from tests.faults.test_outages import Hog
from tests.helpers import poll


async def _busy(engine: PostgresEngine, width: int) -> None:
    """Grow both pools of ``engine`` to ``width`` connections each."""

    async def hold(pool: object) -> None:
        async with pool.connection() as conn:  # type: ignore[attr-defined]
            await conn.execute("SELECT pg_sleep(0.2)")

    await asyncio.gather(*(hold(p) for p in (engine.pool, engine.hot_pool) for _ in range(width)))


async def test_idle_engines_give_their_connections_back(
    cluster: PgCluster, fault_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(core, "POOL_MAX_IDLE", 0.3, raising=False)
    engines = [PostgresEngine(cluster.dsn, prefix=fault_prefix, max_connections=4) for _ in range(3)]
    hog = Hog(cluster.dsn)
    try:
        for engine in engines:
            await engine.open()
            await _busy(engine, 4)
            assert engine.pool.get_stats()["pool_size"] == 4
        # Every slot taken now: the engines' 24 connections, the rest by another client.
        await asyncio.to_thread(hog.take_all)

        def sizes() -> list[tuple[int, int]]:
            return [(e.pool.get_stats()["pool_size"], e.hot_pool.get_stats()["pool_size"]) for e in engines]

        # Idle, the pools shrink by a connection every POOL_MAX_IDLE (0.3 s here) to the main
        # pool's minimum and nothing in the hot pool.
        await poll(sizes, lambda now: now == [(1, 0)] * 3, timeout=5, what="the idle pools to shrink")
        # The other client gets the 21 slots the idle engines gave back.
        more = await asyncio.to_thread(hog.take_all)
        assert more >= 21
    finally:
        hog.release()
        for engine in engines:
            await engine.close()


async def test_an_engine_opened_on_a_full_server_waits_and_recovers(
    cluster: PgCluster, fault_prefix: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    attempts: list[float] = []
    connect = psycopg.AsyncConnection.connect

    async def counted(*args: object, **kwargs: object) -> object:
        attempts.append(time.monotonic())
        return await connect(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(psycopg.AsyncConnection, "connect", counted)
    caplog.set_level(logging.WARNING, logger="conveyor.engine")
    hog = Hog(cluster.dsn)
    engine = PostgresEngine(cluster.dsn, prefix=fault_prefix, max_connections=2)
    try:
        await asyncio.to_thread(hog.take_all)
        opening = asyncio.create_task(engine.open())
        await asyncio.sleep(2)
        assert not opening.done()  # still waiting, not failed
        # No tight loop: attempts 0.5, 1, 2 s apart (3 in these 2 s, the next 1.5 s later).
        assert 2 <= len(attempts) <= 4, attempts
        waiting = [r for r in caplog.records if "takes no connection" in r.getMessage()]
        assert len(waiting) == 1 and "too many clients" in waiting[0].getMessage()
        hog.release()
        await asyncio.wait_for(opening, 10)
        assert await engine.schema_version() is not None
        assert any("takes connections again" in r.getMessage() for r in caplog.records)
    finally:
        hog.release()
        await engine.close()


async def test_a_pool_that_lost_the_server_logs_one_line_then_one_when_back(
    cluster: PgCluster, fault_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    engine = PostgresEngine(cluster.dsn, prefix=fault_prefix, max_connections=2)
    await engine.open()
    listener = await engine.listen(["insert"], lambda name, payload: None)
    caplog.set_level(logging.INFO)
    try:
        assert await engine.schema_version() is not None
        caplog.clear()
        await asyncio.to_thread(cluster.stop, "immediate")

        async def ping() -> bool:
            try:
                async with engine.pool.connection(timeout=0.5) as conn:
                    await conn.execute("SELECT 1")
                return True
            except Exception:
                await asyncio.sleep(0.2)
                return False

        ended = time.monotonic() + 5  # a few of psycopg_pool's retry series (2 s each)
        while time.monotonic() < ended:
            await ping()
        await asyncio.to_thread(cluster.start)
        for _ in range(30):
            if await ping():
                break
        await asyncio.sleep(1.5)  # the listener's next attempt
        name = f"conveyor-{fault_prefix}"
        said = [
            r.getMessage()
            for r in caplog.records
            if r.levelno >= logging.WARNING and r.name in ("psycopg.pool", "conveyor.engine")
        ]
        about = [m for m in said if f"'{name}'" in m]
        assert len(about) == 2, said
        lost, back = about
        assert "cannot connect to the database" in lost and "\n" not in lost
        assert "connected to the database again" in back
        heard = [r for r in caplog.records if r.name == "conveyor.listener"]
        loud = [r.getMessage() for r in heard if r.levelno >= logging.WARNING]
        assert len(loud) == 2, [r.getMessage() for r in heard]
        assert "listener connection lost" in loud[0] and "\n" not in loud[0]
        assert "listener connection is back" in loud[1]
    finally:
        await listener.stop()
        await engine.close()


def test_conveyor_start_on_a_full_server_waits_then_runs_jobs(
    cluster: PgCluster, fault_prefix: str, tmp_path: Path, run_log: Path
) -> None:
    """The node process logs one line, stays up without hammering the server, and runs jobs once
    slots are free."""
    ids = enqueue(cluster.dsn, fault_prefix, run_log, [0.01] * 5)
    hog = Hog(cluster.dsn)
    try:
        with fleet(cluster.dsn, fault_prefix, tmp_path) as nodes:
            hog.take_all()
            node = nodes.start()
            deadline = time.monotonic() + 30  # a process start takes seconds on a loaded machine
            while "takes no connection" not in node.output() and time.monotonic() < deadline:
                time.sleep(0.2)
            time.sleep(2)
            assert node.process.poll() is None, node.output()
            assert node.output().count("takes no connection") == 1, node.output()
            hog.release()
            wait_completed(cluster.dsn, fault_prefix, ids, timeout=30, what=nodes.describe())
            assert "takes connections again" in node.output()
    finally:
        hog.release()
