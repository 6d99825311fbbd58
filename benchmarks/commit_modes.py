"""``commit-modes``: what the engine's ``synchronous_commit=False`` buys (``sessions.hot_session``).

By default a node's claims and acks wait, as every commit on a stock PostgreSQL does, for their WAL
to reach the disk. With the option off they do not. Measured in one run, the two modes alternated
(the order rotated every round so a drift of the shared machine's load weighs on both): a drain of
``--jobs`` no-op jobs (default 30,000) at limits 20 and 100, timed from node start, and the pickup
latency of jobs enqueued one at a time (100 of them, or ``--jobs`` if fewer, 50 ms apart). Reported: medians
and ranges of each mode, and the ratio of the medians (off / on for jobs per second, on - off for
the latency).

Also measured every round, as the reference of what the wait costs: one commit of a one-row insert
on this server, with and without the wait (``commit_wait_ms``: 200 commits each, the difference of
the medians; median and range over the rounds).
"""

from __future__ import annotations

import statistics
import time
import uuid

import psycopg
from common import Figures, Settings
from drain import drain_once
from latency import latency_once

#: Rounds of (on, off), alternated.
COMMIT_ROUNDS = 3
COMMIT_JOBS = 30_000
COMMIT_LATENCY_JOBS = 100
COMMIT_LIMITS = (20, 100)
#: Commits timed per mode for the reference.
REFERENCE_COMMITS = 200


async def commit_modes(settings: Settings) -> Figures:
    rounds = settings.round_count(COMMIT_ROUNDS)
    if settings.engine != "postgres":
        raise SystemExit("commit-modes measures a PostgreSQL option")
    jobs = settings.job_count(COMMIT_JOBS)
    latency_jobs = min(COMMIT_LATENCY_JOBS, jobs)
    measured: dict[str, list[float]] = {}
    waits: list[float] = []
    for round_ in range(rounds):
        # The disk's flush time drifts (0.15 to 0.9 ms a commit on the test machine within one
        # day): the reference is measured every round.
        waits.append(reference_commit_ms(settings.dsn, True) - reference_commit_ms(settings.dsn, False))
        modes = (True, False) if round_ % 2 == 0 else (False, True)
        for synchronous in modes:
            mode = "on" if synchronous else "off"
            for limit in COMMIT_LIMITS:
                drained = await drain_once(settings, jobs, limit, synchronous_commit=synchronous)
                measured.setdefault(f"c{limit}_{mode}", []).append(drained["jobs_per_s"])
            picked = await latency_once(settings, latency_jobs, synchronous_commit=synchronous)
            measured.setdefault(f"p50_ms_{mode}", []).append(picked["p50_ms"])
            measured.setdefault(f"p95_ms_{mode}", []).append(picked["p95_ms"])
    figures: Figures = {"jobs": jobs, "rounds": rounds}
    median = {name: statistics.median(values) for name, values in measured.items()}
    for name, values in measured.items():
        figures[name] = round(median[name], 3)
        figures[f"{name}_range"] = [round(min(values), 3), round(max(values), 3)]
    for limit in COMMIT_LIMITS:
        figures[f"c{limit}_off_over_on"] = round(median[f"c{limit}_off"] / median[f"c{limit}_on"], 3)
    figures["p50_saved_ms"] = round(median["p50_ms_on"] - median["p50_ms_off"], 3)
    figures["commit_wait_ms"] = round(statistics.median(waits), 3)
    figures["commit_wait_range"] = [round(min(waits), 3), round(max(waits), 3)]
    figures["leadership"] = False
    return figures


def reference_commit_ms(dsn: str, synchronous: bool) -> float:
    """The median milliseconds of one autocommitted one-row insert, with or without the wait (on a
    regular table, made and dropped here: a temporary one is never flushed at commit)."""
    table = f"conveyor_commit_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} (x int)".encode())
        try:
            conn.execute(f"SET synchronous_commit = {'on' if synchronous else 'off'}".encode())
            taken = []
            for n in range(REFERENCE_COMMITS):
                began = time.perf_counter()
                conn.execute(f"INSERT INTO {table} VALUES (%s)".encode(), (n,))
                taken.append(time.perf_counter() - began)
        finally:
            conn.execute(f"DROP TABLE {table}".encode())
    return statistics.median(taken) * 1000
