"""``enqueue-one``: one job enqueued at a time, the call a web request makes, against the bare driver.

An app with default settings (``Conveyor(url, prefix=...)``: its own pool; for the ``_sync`` twins
its blocking inserts, or its portal) enqueues ``--jobs`` jobs one call at a time, each call its own
transaction, and the bare driver does the same work on the same database (``enqueue_sides``: the
sides, and SQLite's ``floor``, the engine's own statements through ``sqlite3``). Each round runs
every side in blocks of ``BLOCK`` calls, the sides interleaved block by block in rotating order,
``ROUNDS`` rounds (``--rounds``): on a busy machine each side then meets the same load.

Each side runs as ``plain`` requests, ``unique`` ones (``unique={"period": None}``, every key new)
and ``queueing_lock`` ones (every lock new). One line per mode (async, sync) and variant: the
medians and ranges of jobs/s of the app and of the driver, ``ratio`` (median of the per-round
ratios app/driver; target >= 0.9 for plain), on SQLite ``floor_ratio`` (app/floor), and for unique
and lock ``vs_plain`` (median of the per-round ratios to plain; target >= 0.8). The guard: the
scenario fails when even the best round's ratio is below ``GUARDS`` (a regression beyond this
machine's noise, not a missed target).

``--base COMMIT`` (``paired.py``): the same blocks, each asked of two processes in turn, one on the
current tree and one on the base commit's sources; ``vs_base`` is current/base (target >= 1.2).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from common import Figures, Settings, spread
from enqueue_sides import MODES, VARIANTS, WARMUP, open_sides
from paired import paired_blocks

ROUNDS = 5
JOBS = 1_000
#: Calls per block: small enough that the load changes little within one, large enough that the
#: switch between sides costs nothing measurable.
BLOCK = 50
#: The lowest ratio the best of the rounds may show, per engine; below it the run fails loudly.
#: ``ratio`` is app/driver, ``vs_plain`` a unique or lock variant against plain. Set under the best
#: rounds measured on a noisy 2-core machine (README).
GUARDS: dict[str, dict[str, float]] = {
    "postgres": {"ratio": 0.5, "vs_plain": 0.5},
    "sqlite": {"ratio": 0.3, "vs_plain": 0.5},
}
#: ``--base``: the lowest vs_base the best round may show (a regression against the base commit
#: beyond the noise of paired rounds on this machine).
PAIRED_GUARD = 0.8

#: Times one block: (mode, side, first index, count) -> seconds.
RunBlock = Callable[[str, str, int, int], Awaitable[float]]


async def enqueue_one(settings: Settings) -> list[Figures]:
    if settings.engine not in GUARDS:
        raise RuntimeError(f"enqueue-one runs on {' and '.join(GUARDS)} only")
    jobs = settings.job_count(JOBS)
    rounds = 1 if jobs < WARMUP else settings.round_count(ROUNDS)
    if settings.base is not None:
        async with paired_blocks(settings) as (names, run_block):
            speeds = await interleave(run_block, names, jobs, rounds)
        return paired_figures(speeds, settings, jobs)
    async with open_sides(settings) as sides:
        await sides.warm(10**9)

        async def run_block(mode: str, side: str, start: int, count: int) -> float:
            return await sides.block(mode, side, range(start, start + count))

        speeds = await interleave(run_block, list(sides.names), jobs, rounds)
    return [_figures(speeds, settings.engine, mode, variant, jobs) for mode in MODES for variant in VARIANTS]


Speeds = dict[tuple[str, str], list[float]]


async def interleave(run_block: RunBlock, names: Sequence[str], jobs: int, rounds: int) -> Speeds:
    """Jobs/s per (mode, side) and round: every side's blocks in turn, the order rotated each block."""
    speeds: Speeds = {}
    start = 0
    for _ in range(rounds):
        spent: dict[tuple[str, str], float] = {}
        for number, first in enumerate(range(0, jobs, BLOCK)):
            count = min(BLOCK, jobs - first)
            shift = number % len(names)
            for mode in MODES:
                for side in [*names[shift:], *names[:shift]]:
                    seconds = await run_block(mode, side, start, count)
                    spent[mode, side] = spent.get((mode, side), 0.0) + seconds
                    start += count
        for key, seconds in spent.items():
            speeds.setdefault(key, []).append(jobs / seconds)
    return speeds


def _ratios(top: list[float], bottom: list[float]) -> list[float]:
    return [a / b for a, b in zip(top, bottom, strict=True)]


def _figures(speeds: Speeds, engine: str, mode: str, variant: str, jobs: int) -> Figures:
    app, driver, plain = speeds[mode, variant], speeds[mode, "driver"], speeds[mode, "plain"]
    ratios = _ratios(app, driver)
    figures: Figures = {"mode": mode, "variant": variant, "jobs": jobs, "rounds": len(app)}
    figures["jobs_per_s"], figures["range"] = spread(app, 1)
    figures["driver_jobs_per_s"], figures["driver_range"] = spread(driver, 1)
    figures["ratio"], figures["ratio_range"] = spread(ratios)
    if (mode, "floor") in speeds:
        figures["floor_jobs_per_s"], _ = spread(speeds[mode, "floor"], 1)
        figures["floor_ratio"], figures["floor_ratio_range"] = spread(_ratios(app, speeds[mode, "floor"]))
    exceeded = []
    guards = GUARDS[engine]
    if max(ratios) < guards["ratio"]:
        exceeded.append(f"best round's ratio {max(ratios):.3f} < {guards['ratio']}")
    if variant != "plain":
        against = _ratios(app, plain)
        figures["vs_plain"], figures["vs_plain_range"] = spread(against)
        if max(against) < guards["vs_plain"]:
            exceeded.append(f"best round's vs_plain {max(against):.3f} < {guards['vs_plain']}")
    if exceeded and len(app) >= ROUNDS:  # a one-round smoke run measures nothing
        figures["exceeded"] = "; ".join(exceeded)
    return figures


def paired_figures(speeds: Speeds, settings: Settings, jobs: int) -> list[Figures]:
    """Per mode and variant: ``vs_base`` (median of the per-round ratios current/base), and each
    side's ``ratio`` to its own driver (``base_ratio``)."""
    lines = []
    for mode in MODES:
        for variant in VARIANTS:
            current, base = speeds[mode, f"current:{variant}"], speeds[mode, f"base:{variant}"]
            against = _ratios(current, base)
            figures: Figures = {"mode": mode, "variant": variant, "jobs": jobs, "rounds": len(current)}
            figures["base"] = settings.base
            figures["jobs_per_s"], figures["range"] = spread(current, 1)
            figures["base_jobs_per_s"], figures["base_range"] = spread(base, 1)
            figures["vs_base"], figures["vs_base_range"] = spread(against)
            ratio = _ratios(current, speeds[mode, "current:driver"])
            figures["ratio"], figures["ratio_range"] = spread(ratio)
            figures["base_ratio"], _ = spread(_ratios(base, speeds[mode, "base:driver"]))
            if variant != "plain":
                plain = _ratios(current, speeds[mode, "current:plain"])
                figures["vs_plain"], figures["vs_plain_range"] = spread(plain)
                figures["base_vs_plain"], _ = spread(_ratios(base, speeds[mode, "base:plain"]))
            if max(against) < PAIRED_GUARD and len(current) >= ROUNDS:
                figures["exceeded"] = f"best round's vs_base {max(against):.3f} < {PAIRED_GUARD}"
            lines.append(figures)
    return lines
