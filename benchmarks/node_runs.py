"""Running a node in a scenario: start it on a scenario's schema, wait for its acks, check the jobs.

Shared by the scenarios that time a node (``drain.py``, ``latency.py``, ``cpu.py``, ``cpu_cold.py``,
``workflow_fanout.py``, ``fleet_limits.py``, ``relay.py`` ...). The nodes run with
``leadership=False``: rescue, pruning and cron are leader duties with nothing to do in a benchmark.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import quote

from conveyor import Conveyor, JobRequest
from conveyor.engine.postgres import PostgresEngine
from conveyor.engine.sqlite import SqliteEngine

#: Connections of the engine a node runs on (producer, acker, heartbeat, stager, inserts).
NODE_POOL = 10
#: How often a scenario looks at the acker's count while it waits for the last ack.
POLL = 0.002
NOT_DONE = ("available", "scheduled", "executing", "retryable", "discarded", "cancelled")


@asynccontextmanager
async def running_node(
    base: Conveyor,
    queues: dict[str, Any],
    prepare: Callable[[Conveyor], object] | None = None,
    **options: Any,
) -> AsyncIterator[Conveyor]:
    """A node on ``base``'s engine (its schema), stopped afterwards without closing the engine.
    ``prepare`` gets the app before its node starts (to attach telemetry handlers, say)."""
    app = Conveyor(engine=await base.engine(), queues=queues, leadership=False, **options)
    if prepare is not None:
        prepare(app)
    await app.start()
    try:
        yield app
    finally:
        if app.node is not None:
            await app.node.stop()
            app.node = None


async def written(app: Conveyor, count: int, timeout: float, poll: float = POLL) -> None:
    """Wait until the node's acker has written ``count`` acks (looking every ``poll`` seconds)."""
    assert app.node is not None
    acker = app.node.acker
    deadline = time.perf_counter() + timeout
    while acker.written < count:
        if time.perf_counter() > deadline:
            raise TimeoutError(f"only {acker.written} of {count} jobs were acked within {timeout:g}s")
        await asyncio.sleep(poll)


async def acked(app: Conveyor, count: int, timeout: float) -> None:
    """Wait until the node's acker has written ``count`` acks, woken by the acker itself (an ack
    hook) instead of polling: in a CPU-bound run every wake-up of this process takes CPU from the
    busy workers (a 10 ms poll cost ~0.08 s of CPU in a 4 s run), and a poll adds up to its
    interval to the figure."""
    assert app.node is not None
    acker = app.node.acker
    done = asyncio.Event()

    async def look(_: object) -> None:
        if acker.written >= count:
            done.set()

    acker.hooks.append(look)
    try:
        if acker.written < count:
            await asyncio.wait_for(done.wait(), timeout)
    except TimeoutError:
        raise TimeoutError(f"only {acker.written} of {count} jobs were acked within {timeout:g}s") from None
    finally:
        acker.hooks.remove(look)


async def check_all_completed(app: Conveyor) -> None:
    left = await app.list_jobs(states=NOT_DONE, limit=5)
    if left:
        raise AssertionError(f"jobs not completed: {[(j.id, j.state.value) for j in left]}")


async def enqueue_all(app: Conveyor, requests: Iterable[JobRequest]) -> int:
    return len(await app.enqueue_many(requests))


def engine_like(engine: Any) -> Any:
    """Another engine on the same database and schema as ``engine`` (as another node would have);
    ``Conveyor.stop`` closes it."""
    if isinstance(engine, PostgresEngine):
        return PostgresEngine(engine.dsn, prefix=engine.prefix, max_connections=4)
    if isinstance(engine, SqliteEngine):
        return SqliteEngine(engine.path)
    # Imported here: a paired run's base commit (node-cost --base) may have no MySQL engine.
    from conveyor.engine.mysql import MysqlEngine

    if isinstance(engine, MysqlEngine):
        a = engine.address  # its ``url`` masks the password
        url = f"mysql://{quote(a.user)}:{quote(a.password)}@{a.host}:{a.port}/{quote(a.database)}"
        return MysqlEngine(url, prefix=engine.prefix, max_connections=4)
    raise TypeError(f"no engine like {engine!r}")
