"""Run in other processes by the unique-jobs race test: each inserts the same unique requests."""

from __future__ import annotations

import asyncio
import multiprocessing.queues
import multiprocessing.synchronize

from conveyor import JobRequest
from conveyor.engine.urls import engine_from_url


def requests(count: int) -> list[JobRequest]:
    return [JobRequest("tests.race.Job", args={"n": n}, unique={"period": None}) for n in range(count)]


async def _insert(
    url: str, prefix: str, count: int, bulk: bool, start: multiprocessing.synchronize.Event
) -> int:
    engine = engine_from_url(url, prefix=prefix, pool_size=2)
    await engine.open()
    try:
        start.wait(30)  # every process begins at once
        batch = requests(count)
        if bulk:
            ids = await engine.insert(batch)
        else:
            ids = [(await engine.insert([request]))[0] for request in batch]
        return sum(1 for i in ids if not getattr(i, "conflict", False))
    finally:
        await engine.close()


def insert_all(
    url: str,
    prefix: str,
    count: int,
    bulk: bool,
    start: multiprocessing.synchronize.Event,
    results: multiprocessing.queues.Queue[int | str],
) -> None:
    """Insert ``count`` unique requests; put how many this process created (or the error)."""
    try:
        results.put(asyncio.run(_insert(url, prefix, count, bulk, start)))
    except BaseException as exc:
        results.put(f"{type(exc).__name__}: {exc}")
