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
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import psycopg
from rich.console import Console
from rich.table import Table

from conveyor import Conveyor, JobRequest
from conveyor.engine._sqlfiles import quote_identifier
from conveyor.engine.postgres import PostgresEngine
from conveyor.engine.sqlite import SqliteEngine

if TYPE_CHECKING:  # imported where used: a paired run's base commit may have no MySQL engine
    from conveyor.engine.mysql import MysqlEngine

DEFAULT_DSN = os.environ.get(
    "CONVEYOR_BENCH_DSN", os.environ.get("CONVEYOR_TEST_DSN", "postgresql://postgres@127.0.0.1:5432/test")
)
#: The MariaDB (or MySQL) server of ``--engine mariadb``: each run makes a database of its own there.
DEFAULT_MARIADB_URL = os.environ.get(
    "CONVEYOR_BENCH_MARIADB_URL", os.environ.get("CONVEYOR_MARIADB_URL", "mysql://root@127.0.0.1:3306/test")
)
#: The worker name stored in benchmark jobs. Nothing imports it unless a scenario runs jobs.
BENCH_WORKER = "benchmarks.jobs.noop"

Figures = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Settings:
    """What the command line asked for. ``jobs`` is None when the scenario's default applies."""

    engine: str = "postgres"
    dsn: str = DEFAULT_DSN
    #: ``--engine mariadb`` (and the ``engines`` scenario): the server's URL.
    mariadb_url: str = DEFAULT_MARIADB_URL
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
    size = pool_size if pool_size is not None else max(2, (settings.concurrency or 1) + 1)
    if settings.engine == "sqlite":
        async with fresh_sqlite_app() as app:
            yield app
        return
    if settings.engine == "mariadb":
        async with fresh_mariadb_app(settings.mariadb_url, size) as app:
            yield app
        return
    if settings.engine != "postgres":
        raise SystemExit(f"engine {settings.engine!r} is not supported by the benchmarks yet")
    prefix = f"conveyor_bench_{uuid.uuid4().hex[:10]}"
    engine = PostgresEngine(
        settings.dsn,
        prefix=prefix,
        min_connections=size,
        max_connections=size,
        synchronous_commit=synchronous_commit,
    )
    async with _installed(engine, lambda: drop_schema(settings.dsn, prefix)) as app:
        yield app


@asynccontextmanager
async def _installed(
    engine: PostgresEngine | SqliteEngine | MysqlEngine, drop: Callable[[], Awaitable[None]] | None = None
) -> AsyncIterator[Conveyor]:
    """An app on ``engine``, opened and installed; closed afterwards, then ``drop`` run."""
    app = Conveyor(engine=engine)
    try:
        await engine.open()
        await engine.install()
        yield app
    finally:
        await app.close()
        await engine.close()
        if drop is not None:
            await drop()


@asynccontextmanager
async def fresh_sqlite_app() -> AsyncIterator[Conveyor]:
    """A Conveyor app on a SQLite file made for this run in a temporary directory."""
    with tempfile.TemporaryDirectory(prefix="conveyor-bench-") as folder:
        async with _installed(SqliteEngine(os.path.join(folder, "bench.db"))) as app:
            yield app


@asynccontextmanager
async def fresh_mariadb_app(url: str, pool_size: int) -> AsyncIterator[Conveyor]:
    """A Conveyor app on a MariaDB database made for this run (the engine's ``prefix``), installed
    first and dropped afterwards."""
    from conveyor.engine.mysql import MysqlEngine

    engine = MysqlEngine(url, prefix=f"conveyor_bench_{uuid.uuid4().hex[:10]}", max_connections=pool_size)
    async with _installed(engine, lambda: drop_database(engine)) as app:
        yield app


async def drop_database(engine: MysqlEngine) -> None:
    import asyncmy  # the mysql extra; only the MariaDB runs need it

    a = engine.address
    conn = await asyncmy.connect(host=a.host, port=a.port, user=a.user, password=a.password)
    try:
        async with conn.cursor() as cursor:
            await cursor.execute(f"DROP DATABASE IF EXISTS `{engine.database}`")
    finally:
        conn.close()


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


def spread(values: Sequence[float], digits: int = 3) -> tuple[float, list[float]]:
    """The median of ``values`` and their range, rounded."""
    return round(statistics.median(values), digits), [round(min(values), digits), round(max(values), digits)]


def alternate(round_number: int, sides: Sequence[str]) -> list[str]:
    """The order of ``sides`` in a round: as given, then reversed every other round, so that a drift
    of the machine's load weighs on each side alike."""
    return list(sides) if round_number % 2 == 0 else list(reversed(sides))


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


def print_rows(rows: Sequence[Figures], console: Console | None = None) -> None:
    """Variants that each name their ``row`` as one table, a line per row: a figure with a
    ``<name>_range`` beside it shows as ``median [low-high]``."""
    first = rows[0]
    table = Table(title=f"{first.get('scenario', 'benchmark')} ({first.get('engine', '?')})")
    skipped = ("scenario", "engine", "exceeded")
    columns = [k for k in first if k not in skipped and not (k.endswith("_range") and k[:-6] in first)]
    for name in columns:
        table.add_column(name, justify="left" if name == "row" else "right", no_wrap=True)
    for row in rows:
        cells = []
        for name in columns:
            value = row.get(name)
            low_high = row.get(f"{name}_range")
            shown = _format(value)
            cells.append(f"{shown} [{_format(low_high[0])}-{_format(low_high[1])}]" if low_high else shown)
        table.add_row(*cells)
    if console is None:  # as wide as the table, whatever the terminal: a cell is never folded
        width = Console(width=10_000).measure(table).maximum
        console = Console(width=max(width, Console().width))
    console.print(table)


def _format(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.3f}" if abs(value) < 100 else f"{value:,.1f}"
