"""Node-level figures on the SQLite engine: ``python benchmarks/sqlite_node.py [--repeat N]``.

* ``insert``: one ``engine.insert`` of 100,000 requests built beforehand (the engine's own rate),
  and the same fed by a generator that builds each request as it goes (what ``run.py insert-bulk``
  times: request validation included).
* ``drain``: 20,000 no-op async jobs inserted first, then a node started; the time until the last
  one is completed in the database.
* ``latency``: a node idles with a 5 s poll interval; each job is enqueued and the time from the
  ``enqueue`` call (so: insert, commit and wake-up) to the job's first line is taken.

Each run uses a fresh file in a temporary directory. The machine may be shared: repeat and read
the spread, not one number.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Iterator

from conveyor import Conveyor, JobRequest, job
from conveyor.engine.sqlite import SqliteEngine

STARTED: dict[int, float] = {}


@job
async def noop(n: int = 0) -> None:
    pass


@job
async def mark(n: int) -> None:
    STARTED[n] = time.perf_counter()


def requests(count: int) -> Iterator[JobRequest]:
    for index in range(count):
        yield JobRequest(worker="benchmarks.jobs.noop", args={"index": index, "email": f"user{index}@x.com"})


async def insert_figures(folder: str) -> dict[str, float]:
    engine = SqliteEngine(os.path.join(folder, "insert.db"))
    await engine.open()
    try:
        await engine.install()
        await engine.insert(requests(20))
        built = list(requests(100_000))
        started = time.perf_counter()
        await engine.insert(built)
        prebuilt = time.perf_counter() - started
        started = time.perf_counter()
        await engine.insert(requests(100_000))
        streamed = time.perf_counter() - started
    finally:
        await engine.close()
    return {
        "insert_prebuilt_jobs_per_s": 100_000 / prebuilt,
        "insert_generator_jobs_per_s": 100_000 / streamed,
    }


def completed(path: str) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("SELECT count(*) FROM oban_jobs WHERE state = 'completed'").fetchone()[0])


async def drain_figures(folder: str, jobs: int, limit: int) -> dict[str, float]:
    path = os.path.join(folder, f"drain-{limit}.db")
    app = Conveyor(f"sqlite:///{path}", queues={"default": limit}, jobs=[noop])
    await app.install()
    await app.enqueue_many(noop.new(n=n) for n in range(jobs))
    started = time.perf_counter()
    async with app:
        while await asyncio.to_thread(completed, path) < jobs:  # noqa: ASYNC110 - polling the database
            await asyncio.sleep(0.01)
        seconds = time.perf_counter() - started
    return {f"drain_limit_{limit}_jobs_per_s": jobs / seconds}


async def latency_figures(folder: str, samples: int) -> dict[str, float]:
    app = Conveyor(f"sqlite:///{os.path.join(folder, 'latency.db')}", queues={"default": 10}, jobs=[mark])
    await app.install()
    latencies = []
    async with app:
        await asyncio.sleep(0.2)
        for n in range(samples):
            started = time.perf_counter()
            await app.enqueue(mark.new(n=n))
            while n not in STARTED:  # noqa: ASYNC110 - polling a dict the job writes
                await asyncio.sleep(0.0002)
            latencies.append(STARTED[n] - started)
            await asyncio.sleep(0.005)
    ordered = sorted(latencies)
    return {
        "latency_p50_ms": statistics.median(ordered) * 1000,
        "latency_p95_ms": ordered[int(len(ordered) * 0.95)] * 1000,
        "latency_max_ms": ordered[-1] * 1000,
    }


async def main(repeat: int, jobs: int, limits: list[int]) -> None:
    for run in range(repeat):
        with tempfile.TemporaryDirectory(prefix="conveyor-sqlite-bench-") as folder:
            figures = await insert_figures(folder)
            for limit in limits:
                figures |= await drain_figures(folder, jobs, limit)
            STARTED.clear()
            figures |= await latency_figures(folder, 200)
        print(f"run {run + 1}: " + "  ".join(f"{k}={v:,.1f}" for k, v in figures.items()), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--limits", default="50,200", help="queue limits to drain with, comma-separated")
    args = parser.parse_args()
    asyncio.run(main(args.repeat, args.jobs, [int(x) for x in args.limits.split(",")]))
