"""``node-cost``: the CPU a node spends on each job of its own, with no database round trip.

A drain's ratio to the SQL floor follows the CPU spent per job by the server and by the node
(``cpu_account.py``), and the node's share is the only one Python code can change. Measured in a
drain it comes with the noise of the server sharing the cores; here it stands alone. The node's
real parts run (a ``Producer`` claiming for a queue at limit C, the ``JobRunner`` running
``bench_jobs.noop`` on the loop, the ``Acker`` gathering batches) against a stand-in engine: its
fetch decodes real rows (read once from PostgreSQL with the engine's own fetch, then served again
under new ids) with the engine's own decoder, and its ack encodes each batch as the engine does
(``ack_record`` and orjson), then yields to the loop once, as a round trip would. What is left out
is psycopg's share: sending statements and parsing their results (``drain-floor``'s
``cN_node_cpu_us_per_job`` includes it).

Reported per concurrency (100 and 20, or ``--concurrency``): the median and range over
``NODE_COST_ROUNDS`` rounds (``--rounds``) of the process's CPU time per job, in microseconds.

``--base COMMIT`` (``paired.py``): two processes, one importing the current tree's ``conveyor`` and
one the base commit's, each reading its own sample rows with its own engine, then asked in turn,
per round and level (the order flipped every round), for one stand-in drain (variant
``stand-in``, the figure above) and one real drain of ``PAIRED_DRAIN_JOBS`` no-op jobs through
PostgreSQL (variant ``drain``: ``drain.drain_once``, the process's CPU from the node's start to the
last ack, as ``drain-floor``'s ``cN_node_cpu_us_per_job``, psycopg's share included). ``vs_base``:
the median and range of the per-round ratios current/base of the CPU per job (issue 34's target 2:
<= 0.5). The guard: the run fails when even the best round's ratio is above ``PAIRED_GUARD``.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import bench_jobs
import orjson
from common import DEFAULT_DSN, Figures, Settings, fresh_app
from cpu_account import CpuWindow
from drain import drain_once
from paired import paired_workers

from conveyor._resolver import Resolver
from conveyor._runtime.acker import Acker
from conveyor._runtime.job_link import JobLink
from conveyor._runtime.producer import Producer
from conveyor._runtime.runner import JobRunner
from conveyor.acks import Ack
from conveyor.engine.postgres import PostgresEngine
from conveyor.engine.postgres.hot_path import ack_record
from conveyor.engine.postgres.rows import naive_utc, read_jobs
from conveyor.job import Job
from conveyor.telemetry import Telemetry

NODE_COST_JOBS = 100_000
NODE_COST_LEVELS = (100, 20)
NODE_COST_ROUNDS = 5
#: ``--base``: the highest current/base ratio the best round may show (a regression against the
#: base beyond the noise of paired rounds on this machine).
PAIRED_GUARD = 1.15
#: ``--base``: jobs of each real drain (at most ``--jobs``).
PAIRED_DRAIN_JOBS = 20_000
#: Rows read from the database once, served again and again under new ids.
SAMPLE_ROWS = 100


class StandInEngine:
    """The two calls a producer and an acker make, without the database (see the module doc)."""

    def __init__(self, rows: Sequence[tuple[Any, ...]], jobs: int) -> None:
        self.rows = rows
        self.jobs = jobs
        self.served = 0

    async def fetch_jobs(self, queue: str, demand: int, **_: Any) -> list[Job]:
        await asyncio.sleep(0)
        count = min(demand, self.jobs - self.served)
        first, self.served = self.served, self.served + max(count, 0)
        rows = self.rows
        return read_jobs([(first + i + 1, *rows[i % len(rows)][1:]) for i in range(count)])

    async def ack_jobs(
        self, acks: Sequence[Ack], *, now: datetime | None = None, node: str | None = None
    ) -> list[int]:
        orjson.dumps([ack_record(ack) for ack in acks]).decode()
        naive_utc(now)
        await asyncio.sleep(0)
        return [ack.job_id for ack in acks]

    def is_transient(self, exc: BaseException) -> bool:
        return False


async def sample_rows(settings: Settings) -> list[tuple[Any, ...]]:
    """``SAMPLE_ROWS`` rows of ``noop`` jobs as the engine's fetch returns them."""
    async with fresh_app(settings, pool_size=2) as base:
        await base.enqueue_many(bench_jobs.noop.new(n=n) for n in range(SAMPLE_ROWS))
        engine = await base.engine()
        assert isinstance(engine, PostgresEngine)
        params = {"queue": "default", "demand": SAMPLE_ROWS, "node": "n", "producer": "p", "now": None}
        async with engine.hot_pool.connection() as conn:
            cur = await conn.execute(engine._fetch_statement, params)
            return [tuple(row) for row in await cur.fetchall()]


async def cost_once(rows: Sequence[tuple[Any, ...]], jobs: int, limit: int) -> float:
    """CPU microseconds per job of one node-side drain of ``jobs`` at ``limit``."""
    engine: Any = StandInEngine(rows, jobs)
    telemetry = Telemetry()
    with ThreadPoolExecutor(1) as threads:
        runner = JobRunner(Resolver(), telemetry, threads=threads, processes=None)
        acker = Acker(engine, telemetry=telemetry)
        link = JobLink(engine, telemetry, progress_interval=0.5, poll_interval=1.0)
        producer = Producer(
            "default", limit, engine=engine, runner=runner, acker=acker, node="n", poll_interval=1, link=link
        )
        done = asyncio.Event()

        async def check(acks: Sequence[Ack]) -> None:
            if acker.written >= jobs:
                done.set()

        acker.hooks.append(check)
        await acker.start()
        await producer.start()
        began = time.process_time()
        producer.wake()
        await done.wait()
        spent = time.process_time() - began
        await producer.stop()
        await acker.stop()
    return spent / jobs * 1e6


async def node_cost(settings: Settings) -> list[Figures]:
    if settings.engine != "postgres":
        raise RuntimeError("node-cost reads its sample rows from PostgreSQL")
    jobs = settings.job_count(NODE_COST_JOBS)
    levels = (settings.concurrency,) if settings.concurrency is not None else NODE_COST_LEVELS
    rounds = settings.round_count(NODE_COST_ROUNDS)
    if settings.base is not None:
        return paired_cost(settings, jobs, levels, rounds)
    rows = await sample_rows(settings)
    measured: dict[int, list[float]] = {level: [] for level in levels}
    for _ in range(rounds):
        for level in levels:
            measured[level].append(await cost_once(rows, jobs, level))
    return [
        {
            "jobs": jobs,
            "concurrency": level,
            "rounds": rounds,
            "cpu_us_per_job": round(statistics.median(costs), 2),
            "cpu_us_range": [round(min(costs), 2), round(max(costs), 2)],
        }
        for level, costs in measured.items()
    ]


def paired_cost(settings: Settings, jobs: int, levels: Sequence[int], rounds: int) -> list[Figures]:
    """Each round and level: one stand-in drain and one real drain on each tree, in turn (see the
    module doc)."""
    costs: dict[tuple[str, str, int], list[float]] = {}
    drain_jobs = min(jobs, PAIRED_DRAIN_JOBS)
    with paired_workers(settings, script=Path(__file__).resolve()) as workers:
        for worker in workers.values():  # imports, the sample rows, and a first small drain
            worker.ask({"jobs": min(jobs, 2_000), "limit": levels[0]})
        for number in range(rounds):
            for level in levels:
                order = ("current", "base") if number % 2 == 0 else ("base", "current")
                for variant, count in (("stand-in", jobs), ("drain", drain_jobs)):
                    for tree in order:
                        asked = {"jobs": count, "limit": level, "drain": variant == "drain"}
                        cost = workers[tree].ask(asked)["cpu_us"]
                        costs.setdefault((variant, tree, level), []).append(cost)
    lines = []
    for variant, count in (("stand-in", jobs), ("drain", drain_jobs)):
        lines += [_paired_line(settings, variant, count, level, rounds, costs) for level in levels]
    return lines


def _paired_line(
    settings: Settings,
    variant: str,
    jobs: int,
    level: int,
    rounds: int,
    costs: dict[tuple[str, str, int], list[float]],
) -> Figures:
    current, base = costs[variant, "current", level], costs[variant, "base", level]
    ratios = [a / b for a, b in zip(current, base, strict=True)]
    figures: Figures = {"variant": variant, "jobs": jobs, "concurrency": level, "rounds": rounds}
    figures["base"] = settings.base
    for name, values in (("cpu_us", current), ("base_cpu_us", base)):
        figures[f"{name}_per_job"] = round(statistics.median(values), 2)
        figures[f"{name}_range"] = [round(min(values), 2), round(max(values), 2)]
    figures["vs_base"] = round(statistics.median(ratios), 3)
    figures["vs_base_range"] = [round(min(ratios), 3), round(max(ratios), 3)]
    if min(ratios) > PAIRED_GUARD and rounds >= NODE_COST_ROUNDS:
        figures["exceeded"] = f"best round's vs_base {min(ratios):.3f} > {PAIRED_GUARD}"
    return figures


async def serve(dsn: str) -> None:
    """Answer ``{"jobs", "limit", "drain"}`` lines on stdin with ``{"cpu_us"}`` lines, until stdin
    ends: one ``cost_once`` on sample rows read once with this process's engine, or with ``drain``
    true one real drain (``drain.drain_once``: this process's CPU from the node's start to the last
    ack written, as ``drain-floor``'s ``cN_node_cpu_us_per_job``)."""
    settings = Settings(engine="postgres", dsn=dsn)
    rows = await sample_rows(settings)
    while line := await asyncio.to_thread(sys.stdin.readline):
        asked = json.loads(line)
        jobs, limit = asked["jobs"], asked["limit"]
        if asked.get("drain"):
            window = CpuWindow(None)
            await drain_once(settings, jobs, limit, window=window)
            cost = window.own / jobs * 1e6
        else:
            cost = await cost_once(rows, jobs, limit)
        print(json.dumps({"cpu_us": cost}), flush=True)


if __name__ == "__main__":  # a side of a paired run (paired.py: engine, dsn)
    asyncio.run(serve(sys.argv[2] if len(sys.argv) > 2 else DEFAULT_DSN))
