"""The engine's pools after a server restart, without a node or a listener to help: callers waiting
for a connection get one within about a second of the server being back, however long it was away.

psycopg_pool's own policy waits 1, 2, 4, 8, 16 s... between attempts; after 8 s away that would be
up to 7 s late."""

from __future__ import annotations

import asyncio
import time

import pytest

from conveyor.engine.postgres import PostgresEngine
from tests.faults.cluster import PgCluster

OUTAGE = 8.0


@pytest.mark.slow
async def test_pools_reconnect_within_a_second_after_a_long_outage(
    cluster: PgCluster, fault_prefix: str
) -> None:
    engine = PostgresEngine(cluster.dsn, prefix=fault_prefix, max_connections=3)
    await engine.open()
    try:
        # Both pools hold connections that die with the server.
        assert (
            await engine.fetch_jobs("default", 1, node="n", producer="00000000-0000-0000-0000-000000000000")
            == []
        )
        assert await engine.schema_version() is not None
        await asyncio.to_thread(cluster.crash)
        crashed = time.monotonic()

        async def keep_asking(call: str) -> float:
            """Retry like a node's services do; return the monotonic time of the first success."""
            while True:
                try:
                    if call == "hot":
                        await engine.fetch_jobs(
                            "default", 1, node="n", producer="00000000-0000-0000-0000-000000000000"
                        )
                    else:
                        await engine.schema_version()
                    if time.monotonic() - crashed > OUTAGE:
                        return time.monotonic()
                except Exception:
                    await asyncio.sleep(0.1)

        hot = asyncio.create_task(keep_asking("hot"))
        main = asyncio.create_task(keep_asking("main"))
        await asyncio.sleep(OUTAGE)
        back = time.monotonic()
        await asyncio.to_thread(cluster.start)
        done = await asyncio.wait_for(asyncio.gather(hot, main), 30)
    finally:
        await engine.close()
    delays = [round(t - back, 3) for t in done]
    print(
        f"\nfirst statement after a {OUTAGE:.0f} s outage, hot pool and main pool: {delays} s after restart"
    )
    assert max(delays) <= 2.0, delays


async def test_the_listener_is_back_within_a_second_and_cleans_the_pools_first(
    cluster: PgCluster, fault_prefix: str
) -> None:
    engine = PostgresEngine(cluster.dsn, prefix=fault_prefix, max_connections=3)
    await engine.open()
    heard: list[tuple[float, str]] = []
    checked: list[float] = []
    server_back = engine._server_back

    async def spy() -> None:
        checked.append(time.monotonic())
        await server_back()

    engine._server_back = spy  # type: ignore[method-assign]
    listener = await engine.listen(["insert"], lambda name, payload: heard.append((time.monotonic(), name)))
    try:
        assert await engine.schema_version() is not None  # an idle connection that dies with the server
        await asyncio.to_thread(cluster.crash)
        await asyncio.sleep(6)  # long enough for the old policy's delays to reach 5 s
        back = time.monotonic()
        await asyncio.to_thread(cluster.start)
        for _ in range(300):
            if any(name == "listener" and at > back for at, name in heard):
                break
            await asyncio.sleep(0.01)
        reconnected = min(at for at, name in heard if name == "listener" and at > back)
        assert checked and back < checked[-1] <= reconnected  # the pools were checked first
        # The dead idle connection is gone: the next statement works at the first try.
        assert await engine.schema_version() is not None
    finally:
        await listener.stop()
        await engine.close()
    print(f"\nlistener back {reconnected - back:.3f}s after the server start command")
    assert reconnected - back <= 1.5
