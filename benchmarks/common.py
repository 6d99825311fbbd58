"""Shared helpers for the benchmark scenarios: settings, a fresh database per run, timing, output.

A scenario is ``async def scenario(settings: Settings) -> Figures``: it opens an app with
``fresh_app(settings)``, does its work, and returns the figures it measured (plain numbers and
strings). ``run.py`` adds the scenario name, the engine and the job count, and prints them.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from rich.console import Console
from rich.table import Table

from conveyor import Conveyor, JobRequest
from conveyor.engine._sqlfiles import quote_identifier
from conveyor.engine.postgres import PostgresEngine
from conveyor.engine.sqlite import SqliteEngine

DEFAULT_DSN = os.environ.get(
    "CONVEYOR_BENCH_DSN", os.environ.get("CONVEYOR_TEST_DSN", "postgresql://postgres@127.0.0.1:5432/test")
)
#: The worker name stored in benchmark jobs. Nothing imports it unless a scenario runs jobs.
BENCH_WORKER = "benchmarks.jobs.noop"

Figures = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Settings:
    """What the command line asked for. ``jobs`` is None when the scenario's default applies."""

    engine: str = "postgres"
    dsn: str = DEFAULT_DSN
    jobs: int | None = None
    #: None when not given: each scenario has its own default (``drain`` runs several levels).
    concurrency: int | None = None
    #: ``cpu``: milliseconds of work per job (None: its default).
    job_ms: float | None = None
    #: ``drain-history``: completed jobs in the table before the drain (None: its default).
    history: int | None = None
    #: ``soak``: minutes to run (None: its default).
    minutes: float | None = None
    #: Rounds of the scenarios that alternate variants (None: each its own; the smoke tests use 1).
    rounds: int | None = None
    #: A commit to measure against in paired rounds (``paired.py``; the scenarios in ``PAIRED``).
    base: str | None = None

    def job_count(self, default: int) -> int:
        return self.jobs if self.jobs is not None else default

    def round_count(self, default: int) -> int:
        return self.rounds if self.rounds is not None else default


#: A scenario returns its figures, or one set of figures per variant it ran (e.g. per concurrency).
Scenario = Callable[[Settings], Coroutine[Any, Any, Figures | list[Figures]]]


# -- the database ----------------------------------------------------------------------------
@asynccontextmanager
async def fresh_app(
    settings: Settings, *, pool_size: int | None = None, synchronous_commit: bool = True
) -> AsyncIterator[Conveyor]:
    """A Conveyor app on a schema made for this run, installed first and dropped afterwards
    (``synchronous_commit``: the PostgreSQL engine's option, see ``sessions.hot_session``)."""
    if settings.engine == "sqlite":
        async with fresh_sqlite_app() as app:
            yield app
        return
    if settings.engine != "postgres":
        raise SystemExit(f"engine {settings.engine!r} is not supported by the benchmarks yet")
    prefix = f"conveyor_bench_{uuid.uuid4().hex[:10]}"
    size = pool_size if pool_size is not None else max(2, (settings.concurrency or 1) + 1)
    engine = PostgresEngine(
        settings.dsn,
        prefix=prefix,
        min_connections=size,
        max_connections=size,
        synchronous_commit=synchronous_commit,
    )
    app = Conveyor(engine=engine)
    try:
        await engine.open()
        await engine.install()
        yield app
    finally:
        await app.close()
        await engine.close()
        await drop_schema(settings.dsn, prefix)


@asynccontextmanager
async def fresh_sqlite_app() -> AsyncIterator[Conveyor]:
    """A Conveyor app on a SQLite file made for this run in a temporary directory."""
    with tempfile.TemporaryDirectory(prefix="conveyor-bench-") as folder:
        engine = SqliteEngine(os.path.join(folder, "bench.db"))
        app = Conveyor(engine=engine)
        try:
            await engine.open()
            await engine.install()
            yield app
        finally:
            await app.close()
            await engine.close()


async def drop_schema(dsn: str, prefix: str) -> None:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute(f"DROP SCHEMA IF EXISTS {quote_identifier(prefix)} CASCADE".encode())


def job_requests(count: int, *, queue: str = "default") -> Iterator[JobRequest]:
    """``count`` small, typical job requests, made lazily (as an application's loop would)."""
    for index in range(count):
        yield JobRequest(
            worker=BENCH_WORKER,
            args={"index": index, "email": f"user{index}@example.com"},
            queue=queue,
        )


# -- timing ----------------------------------------------------------------------------------
class Stopwatch:
    """``with Stopwatch() as watch: ...`` then ``watch.seconds``; monotonic, high resolution."""

    def __init__(self) -> None:
        self.started = 0.0
        self.seconds = 0.0

    def __enter__(self) -> Stopwatch:
        self.started = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.started


def percentile(values: Sequence[float], fraction: float) -> float:
    """The ``fraction`` (0..1) percentile of ``values``, interpolated linearly between ranks."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = fraction * (len(ordered) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def latency_figures(seconds: Sequence[float], prefix: str = "") -> Figures:
    """p50/p95/p99 (and max) of a list of durations in seconds, as milliseconds."""
    return {
        f"{prefix}p50_ms": round(percentile(seconds, 0.50) * 1000, 3),
        f"{prefix}p95_ms": round(percentile(seconds, 0.95) * 1000, 3),
        f"{prefix}p99_ms": round(percentile(seconds, 0.99) * 1000, 3),
        f"{prefix}max_ms": round(max(seconds) * 1000, 3) if seconds else math.nan,
    }


def guarded(figures: Figures, floor: float, full: bool) -> Figures:
    """``figures`` of ``compared``, marked ``exceeded`` (the run fails) when even the best round's
    ratio to plain is below ``floor``: a regression beyond this machine's noise, not a missed target.
    Only for a run of the scenario's full rounds (``full``): a smoke run measures nothing."""
    best = max(figures["round_ratios"])
    if full and best < floor:
        figures["exceeded"] = f"best round's ratio {best:.3f} < {floor}"
    return figures


def compared(variant: str, measured: Sequence[float], plain: Sequence[float]) -> Figures:
    """The medians and ranges of rounds of a variant against plain rounds of the same run, the
    ratio of the medians (what the scenarios that measure a cost report), and each round's ratio to
    the plain round beside it with their median (``paired_ratio``: less noisy on a shared machine)."""
    median = statistics.median(measured)
    paired = [round(m / p, 3) for m, p in zip(measured, plain, strict=True)]
    return {
        "rounds": len(measured),
        "jobs_per_s": median,
        f"{variant}_range": [min(measured), max(measured)],
        "plain_jobs_per_s": statistics.median(plain),
        "plain_range": [min(plain), max(plain)],
        "ratio": round(median / statistics.median(plain), 3),
        "round_ratios": paired,
        "paired_ratio": round(statistics.median(paired), 3),
    }


def rate(count: int, seconds: float) -> float:
    return round(count / seconds, 1) if seconds > 0 else math.inf


# -- output ----------------------------------------------------------------------------------
def print_json(figures: Figures) -> None:
    print(json.dumps(figures), flush=True)


def print_table(figures: Figures, console: Console | None = None) -> None:
    console = console or Console()
    table = Table(title=f"{figures.get('scenario', 'benchmark')} ({figures.get('engine', '?')})")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for name, value in figures.items():
        if name in ("scenario", "engine"):
            continue
        table.add_row(name, _format(value))
    console.print(table)


def _format(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.3f}" if abs(value) < 100 else f"{value:,.1f}"
