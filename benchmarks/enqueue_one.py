"""``enqueue-one``: one job enqueued at a time, the call a web request makes, against the bare driver.

An app with default settings (``Conveyor(url, prefix=...)``: its own pool, its own portal for the
``_sync`` twins) enqueues ``--jobs`` jobs one call at a time, each call its own transaction, and the
bare driver does the same work on the same database, alternated in one run, ``ROUNDS`` rounds:

* PostgreSQL, async: one ``INSERT … RETURNING`` with ``pg_notify`` in the same statement, on a
  connection of the app's own pool (autocommit, as the app's; one statement is one transaction).
* PostgreSQL, sync: the same statement on a blocking psycopg connection of a ``psycopg_pool``
  ``ConnectionPool`` (the blocking driver a web request would use), from a plain thread.
* SQLite (async and sync alike): one ``INSERT`` per transaction through ``sqlite3``, on a connection
  set up as the engine's writer (WAL, ``synchronous = NORMAL``), in the calling thread.

Each side runs as ``plain`` requests, ``unique`` ones (``unique={"period": None}``, every key new)
and ``queueing_lock`` ones (every lock new). One line per mode (async, sync) and variant: the
medians and ranges of jobs/s of the app and of the driver, ``ratio`` (median of the per-round
ratios app/driver; target >= 0.9 for plain) and for unique and lock ``vs_plain`` (median of the
per-round ratios to plain; target >= 0.8). The guard: the scenario fails when even the best round's
ratio is below ``GUARDS`` (a regression beyond this machine's noise, not a missed target).
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import statistics
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from common import BENCH_WORKER, Figures, Settings, drop_schema
from paired import paired_rounds
from psycopg_pool import ConnectionPool

from conveyor import Conveyor, JobRequest
from conveyor.engine.postgres import PostgresEngine
from conveyor.engine.sqlite import SqliteEngine

ROUNDS = 5
JOBS = 1_000
WARMUP = 50
VARIANTS = ("plain", "unique", "lock")
#: The lowest ratio the best of the rounds may show, per engine; below it the run fails loudly.
#: ``ratio`` is app/driver, ``vs_plain`` a unique or lock variant against plain. Set under the best
#: rounds measured on a noisy 2-core machine (README): SQLite's app hops to its writer thread and
#: back, which a busy machine slows far more than the driver in the caller's thread (best sync
#: rounds 0.28-0.57 there, in runs whose code differed by one statement fewer).
GUARDS: dict[str, dict[str, float]] = {
    "postgres": {"ratio": 0.4, "vs_plain": 0.5},
    "sqlite": {"ratio": 0.2, "vs_plain": 0.5},
}

#: ``--base``: the lowest vs_base the best round may show (a regression against the base commit
#: beyond the noise of paired rounds on this machine).
PAIRED_GUARD = 0.8

_PG_BARE = (
    "WITH inserted AS (INSERT INTO {prefix}.oban_jobs (state, queue, worker, args)"
    " VALUES ('available', %s, %s, %s::jsonb) RETURNING id, queue)"
    " SELECT id, pg_notify(%s, json_build_object('queue', queue)::text) FROM inserted"
)
_SQLITE_BARE = "INSERT INTO oban_jobs (state, queue, worker, args) VALUES ('available', ?, ?, ?)"


def request(variant: str, index: int) -> JobRequest:
    args = {"index": index, "email": f"user{index}@example.com"}
    if variant == "unique":
        return JobRequest(worker=BENCH_WORKER, args=args, unique={"period": None})
    if variant == "lock":
        return JobRequest(worker=BENCH_WORKER, args=args, queueing_lock=f"lock-{index}")
    return JobRequest(worker=BENCH_WORKER, args=args)


class Counter:
    """Fresh indexes for each round, so unique keys and locks never repeat in a run."""

    def __init__(self) -> None:
        self.next = 0

    def take(self, count: int) -> range:
        start, self.next = self.next, self.next + count
        return range(start, start + count)


async def enqueue_one(settings: Settings) -> list[Figures]:
    jobs = settings.job_count(JOBS)
    rounds = 1 if jobs < WARMUP else settings.round_count(ROUNDS)
    if settings.base is not None:
        return await enqueue_one_paired(settings, jobs, rounds)
    async with database(settings) as (url, prefix, bare_async, bare_sync):
        app = Conveyor(url, prefix=prefix)
        try:
            return await _measure(app, settings.engine, jobs, rounds, bare_async, bare_sync)
        finally:
            await app.close()
            app.close_sync()


BareFactory = Callable[[Conveyor], Callable[[int], Any]]


async def _measure(
    app: Conveyor, engine: str, jobs: int, rounds: int, bare_async: BareFactory, bare_sync: BareFactory
) -> list[Figures]:
    counter = Counter()
    for index in counter.take(WARMUP):  # the pools, prepared statements and caches
        await app.enqueue(request("plain", index))
        app_sync = await asyncio.to_thread(app.enqueue_sync, request("unique", index + 1_000_000_000))
        assert app_sync > 0
    run_async, run_sync = bare_async(app), bare_sync(app)
    for index in counter.take(WARMUP):
        await run_async(index)
        await asyncio.to_thread(run_sync, index)
    speeds: dict[tuple[str, str], list[float]] = {}
    for _ in range(rounds):
        for mode in ("async", "sync"):
            speeds.setdefault((mode, "driver"), []).append(
                await _timed(mode, jobs, counter, run_async if mode == "async" else run_sync)
            )
            for variant in VARIANTS:
                speeds.setdefault((mode, variant), []).append(
                    await _timed_app(app, mode, variant, jobs, counter)
                )
    return [
        _figures(speeds, engine, mode, variant, jobs) for mode in ("async", "sync") for variant in VARIANTS
    ]


async def _timed(mode: str, jobs: int, counter: Counter, call: Callable[[int], Any]) -> float:
    indexes = counter.take(jobs)
    if mode == "async":
        started = time.perf_counter()
        for index in indexes:
            await call(index)
        return jobs / (time.perf_counter() - started)

    def loop() -> float:
        started = time.perf_counter()
        for index in indexes:
            call(index)
        return jobs / (time.perf_counter() - started)

    return await asyncio.to_thread(loop)


async def _timed_app(app: Conveyor, mode: str, variant: str, jobs: int, counter: Counter) -> float:
    requests = [request(variant, index) for index in counter.take(jobs)]
    if mode == "async":
        started = time.perf_counter()
        for one in requests:
            await app.enqueue(one)
        return jobs / (time.perf_counter() - started)

    def loop() -> float:
        started = time.perf_counter()
        for one in requests:
            app.enqueue_sync(one)
        return jobs / (time.perf_counter() - started)

    return await asyncio.to_thread(loop)


def _figures(
    speeds: dict[tuple[str, str], list[float]], engine: str, mode: str, variant: str, jobs: int
) -> Figures:
    app, driver, plain = speeds[mode, variant], speeds[mode, "driver"], speeds[mode, "plain"]
    ratios = [a / d for a, d in zip(app, driver, strict=True)]
    figures: Figures = {
        "mode": mode,
        "variant": variant,
        "jobs": jobs,
        "rounds": len(app),
        "jobs_per_s": round(statistics.median(app), 1),
        "range": [round(min(app), 1), round(max(app), 1)],
        "driver_jobs_per_s": round(statistics.median(driver), 1),
        "driver_range": [round(min(driver), 1), round(max(driver), 1)],
        "ratio": round(statistics.median(ratios), 3),
        "ratio_range": [round(min(ratios), 3), round(max(ratios), 3)],
    }
    exceeded = []
    guards = GUARDS[engine]
    if max(ratios) < guards["ratio"]:
        exceeded.append(f"best round's ratio {max(ratios):.3f} < {guards['ratio']}")
    if variant != "plain":
        against = [v / p for v, p in zip(app, plain, strict=True)]
        figures["vs_plain"] = round(statistics.median(against), 3)
        figures["vs_plain_range"] = [round(min(against), 3), round(max(against), 3)]
        if max(against) < guards["vs_plain"]:
            exceeded.append(f"best round's vs_plain {max(against):.3f} < {guards['vs_plain']}")
    if exceeded and len(app) >= ROUNDS:  # a one-round smoke run measures nothing
        figures["exceeded"] = "; ".join(exceeded)
    return figures


async def enqueue_one_paired(settings: Settings, jobs: int, rounds: int) -> list[Figures]:
    """``--base COMMIT``: each round once on the current tree and once on the base (``paired``).
    Per mode and variant: ``vs_base`` (median of the per-round ratios of jobs/s, current/base;
    target >= 1.2 for plain), and each side's ``ratio`` to the driver it measured in its round."""
    pairs = await paired_rounds("enqueue-one", settings, rounds)
    lines = []
    for index, first in enumerate(pairs[0][0]):
        current = [pair[0][index] for pair in pairs]
        base = [pair[1][index] for pair in pairs]
        assert all((b["mode"], b["variant"]) == (first["mode"], first["variant"]) for b in base)
        against = [c["jobs_per_s"] / b["jobs_per_s"] for c, b in zip(current, base, strict=True)]
        figures: Figures = {
            "mode": first["mode"],
            "variant": first["variant"],
            "jobs": jobs,
            "rounds": len(pairs),
            "base": settings.base,
            "jobs_per_s": _median(c["jobs_per_s"] for c in current),
            "base_jobs_per_s": _median(b["jobs_per_s"] for b in base),
            "vs_base": _median(against, 3),
            "vs_base_range": [round(min(against), 3), round(max(against), 3)],
            "ratio": _median((c["ratio"] for c in current), 3),
            "ratio_range": [min(c["ratio"] for c in current), max(c["ratio"] for c in current)],
            "base_ratio": _median((b["ratio"] for b in base), 3),
        }
        if first["variant"] != "plain":
            figures["vs_plain"] = _median((c["vs_plain"] for c in current), 3)
        if max(against) < PAIRED_GUARD and len(pairs) >= ROUNDS:
            figures["exceeded"] = f"best round's vs_base {max(against):.3f} < {PAIRED_GUARD}"
        lines.append(figures)
    return lines


def _median(values: Iterable[float], digits: int = 1) -> float:
    return round(statistics.median(list(values)), digits)


@asynccontextmanager
async def database(settings: Settings) -> AsyncIterator[tuple[str, str, BareFactory, BareFactory]]:
    """The app's URL and prefix on a schema (or file) installed for this run, and the bare drivers."""
    if settings.engine == "sqlite":
        with tempfile.TemporaryDirectory(prefix="conveyor-bench-") as folder:
            path = os.path.join(folder, "bench.db")
            await _install(SqliteEngine(path))
            with _sqlite_bare(path) as (bare_async, bare_sync):
                yield f"sqlite:///{path}", "public", bare_async, bare_sync
        return
    prefix = f"conveyor_bench_{uuid.uuid4().hex[:10]}"
    try:
        await _install(PostgresEngine(settings.dsn, prefix=prefix))
        statement = _PG_BARE.format(prefix=prefix).encode()
        channel = f"{prefix}.oban_insert"
        with ConnectionPool(settings.dsn, min_size=1, max_size=1, kwargs={"autocommit": True}) as pool:

            def bare_async(app: Conveyor) -> Callable[[int], Any]:
                engine = app._binding._engine  # the app's own engine: the same pool
                assert isinstance(engine, PostgresEngine)

                async def insert(index: int) -> None:
                    async with engine.pool.connection() as conn, conn.cursor() as cur:
                        await cur.execute(statement, _pg_params(index, channel))
                        await cur.fetchall()

                return insert

            def bare_sync(app: Conveyor) -> Callable[[int], Any]:
                def insert(index: int) -> None:
                    with pool.connection() as conn, conn.cursor() as cur:
                        cur.execute(statement, _pg_params(index, channel))
                        cur.fetchall()

                return insert

            yield settings.dsn, prefix, bare_async, bare_sync
    finally:
        await drop_schema(settings.dsn, prefix)


def _pg_params(index: int, channel: str) -> tuple[Any, ...]:
    args = json.dumps({"index": index, "email": f"user{index}@example.com"})
    return ("default", BENCH_WORKER, args, channel)


@contextmanager
def _sqlite_bare(path: str) -> Iterator[tuple[BareFactory, BareFactory]]:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=5.0)
    conn.execute("PRAGMA synchronous = NORMAL")

    def insert(index: int) -> None:
        args = json.dumps({"index": index, "email": f"user{index}@example.com"})
        conn.execute(_SQLITE_BARE, ("default", BENCH_WORKER, args))

    async def insert_async(index: int) -> None:
        insert(index)

    try:
        yield (lambda app: insert_async), (lambda app: insert)
    finally:
        conn.close()


async def _install(engine: PostgresEngine | SqliteEngine) -> None:
    await engine.open()
    try:
        await engine.install()
    finally:
        await engine.close()
