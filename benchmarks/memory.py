"""Memory guards: scenarios that measure a node's or a call's memory and fail past a limit.

``memory`` runs two checks, each in a process of its own (``memory_probe.py``), so nothing of the
benchmark harness is counted:

* ``node-c1000``: a node with ``queues={"default": 1000}`` runs 3,000 async jobs that each wait
  2 s, so 1,000 execute at once three times over. The figure is the node process's peak RSS
  (``VmHWM``); limit 64 MiB. It fails too if the node never had 900 jobs executing at once (then
  it did not measure what it claims).
* ``enqueue-1m``: one ``enqueue_many`` of 1,000,000 requests from a generator (``--jobs`` to
  change). The figure is the peak RSS during the call less the RSS before it, sampled every 5 ms:
  the streaming and the result together; limit 50 MiB. ``ids_mb`` says what the result occupies (a
  ``JobIds``, 8 bytes an id: about 8 MiB for a million) and ``growth_beyond_ids_mb`` the rest.

``soak`` (``--minutes``, default 30) runs a node (queue ``soak``, limit 20, leadership and a pruner
on a 60 s retention) while this process enqueues about 36 jobs a second that end every way a job
can: complete, fail then retry, snooze, cancel, discard, record a value, half on the event loop and
half in threads. It prints the node's RSS every minute (to stderr) and fails when, after a warm-up
of a third of the run (5 minutes at most), the RSS of the last window exceeds that of the first
window after the warm-up by more than ``SOAK_TOLERANCE_MB`` (each window's median of samples taken
every 5 s; a window is a minute, or a third of a shorter run).

A limit exceeded is reported in the figures as ``exceeded``; ``run.py`` then prints it and exits
non-zero. PostgreSQL only.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import psycopg
from common import Figures, Settings, fresh_app
from memory_probe import peak_rss_mb, rss_mb

from conveyor import JobRequest

PROBE = str(Path(__file__).resolve().parent / "memory_probe.py")
NODE_LIMIT_MB = 64.0
NODE_CONCURRENCY = 1_000
NODE_JOBS = 3_000
NODE_JOB_SECONDS = 2.0
ENQUEUE_JOBS = 1_000_000
ENQUEUE_LIMIT_MB = 50.0
SOAK_MINUTES = 30.0
SOAK_TOLERANCE_MB = 5.0
SOAK_SAMPLE = 5.0
#: Jobs enqueued per second in the soak: each outcome on the loop and in a thread, three times.
SOAK_BATCH = 3


@asynccontextmanager
async def probe_node(
    dsn: str, prefix: str, queues: dict[str, int], settings: dict[str, Any]
) -> AsyncIterator[asyncio.subprocess.Process]:
    """A node process (``memory_probe.py node``), ready; stopped (its stdin closed) on the way out."""
    command = [sys.executable, PROBE, "node", "--dsn", dsn, "--prefix", prefix]
    command += [f"--queue={name}={limit}" for name, limit in queues.items()]
    command += [f"--setting={name}={json.dumps(value)}" for name, value in settings.items()]
    process = await asyncio.create_subprocess_exec(
        *command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        line = await asyncio.wait_for(process.stdout.readline(), 60)
        if line.strip() != b"ready":
            raise RuntimeError(f"the node process did not start (exit {await process.wait()})")
        yield process
    finally:
        process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), 60)
        except TimeoutError:
            process.kill()
            await process.wait()


async def _states(dsn: str, prefix: str) -> dict[str, int]:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        cur = await conn.execute(f'SELECT state::text, count(*) FROM "{prefix}".oban_jobs GROUP BY 1')
        return {state: count for state, count in await cur.fetchall()}


async def node_c1000(settings: Settings) -> Figures:
    async with fresh_app(settings) as app:
        prefix = (await app.engine()).prefix  # type: ignore[attr-defined]
        node_settings = {"leadership": False}
        async with probe_node(settings.dsn, prefix, {"default": NODE_CONCURRENCY}, node_settings) as node:
            idle = rss_mb(node.pid)
            await app.enqueue_many(
                JobRequest("bench_jobs.nap", {"seconds": NODE_JOB_SECONDS}) for _ in range(NODE_JOBS)
            )
            most, deadline = 0, time.monotonic() + 120
            while time.monotonic() < deadline:
                states = await _states(settings.dsn, prefix)
                most = max(most, states.get("executing", 0))
                if states.get("completed", 0) >= NODE_JOBS:
                    break
                await asyncio.sleep(0.1)
            peak = peak_rss_mb(node.pid)
    figures: Figures = {
        "check": "node-c1000",
        "jobs": NODE_JOBS,
        "concurrency": NODE_CONCURRENCY,
        "most_executing_rows": most,
        "idle_rss_mb": round(idle, 1),
        "peak_rss_mb": round(peak, 1),
        "limit_mb": NODE_LIMIT_MB,
    }
    if states.get("completed", 0) < NODE_JOBS:
        figures["exceeded"] = f"the node completed {states.get('completed', 0)} of {NODE_JOBS} jobs in 120 s"
    elif most < 0.9 * NODE_CONCURRENCY:
        figures["exceeded"] = f"the node never ran {NODE_CONCURRENCY} jobs at once (at most {most})"
    elif peak > NODE_LIMIT_MB:
        figures["exceeded"] = (
            f"a node running {NODE_CONCURRENCY} async jobs reached {peak:.1f} MiB RSS "
            f"(limit {NODE_LIMIT_MB:.0f} MiB)"
        )
    return figures


async def enqueue_1m(settings: Settings) -> Figures:
    jobs = settings.job_count(ENQUEUE_JOBS)
    async with fresh_app(settings) as app:
        prefix = (await app.engine()).prefix  # type: ignore[attr-defined]
        command = [PROBE, "enqueue", "--dsn", settings.dsn, "--prefix", prefix, "--jobs", str(jobs)]
        process = await asyncio.create_subprocess_exec(
            sys.executable, *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out, err = await process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"the enqueue probe failed: {err.decode()}")
    probe = json.loads(out)
    growth = probe["rss_peak_mb"] - probe["rss_before_mb"]
    beyond = growth - probe["ids_mb"]
    figures: Figures = {
        "check": "enqueue-1m",
        **probe,
        "growth_mb": round(growth, 1),
        "growth_beyond_ids_mb": round(beyond, 1),
        "limit_mb": ENQUEUE_LIMIT_MB,
    }
    if growth > ENQUEUE_LIMIT_MB:
        figures["exceeded"] = (
            f"enqueue_many of {jobs:,} streamed requests grew RSS by {growth:.1f} MiB, its result "
            f"included (limit {ENQUEUE_LIMIT_MB:.0f} MiB)"
        )
    return figures


async def memory(settings: Settings) -> list[Figures]:
    if settings.engine != "postgres":
        raise SystemExit("the memory guards run on PostgreSQL")
    return [await node_c1000(settings), await enqueue_1m(settings)]


# -- soak ------------------------------------------------------------------------------------------
def _soak_requests(round_number: int) -> list[JobRequest]:
    from bench_jobs import SOAK_OUTCOMES

    requests = []
    for copy in range(SOAK_BATCH):
        for outcome in SOAK_OUTCOMES:
            for worker in ("bench_jobs.soak_async", "bench_jobs.soak_thread"):
                # Payloads of varied sizes, so the allocator sees a realistic spread.
                payload = "x" * ((round_number * 37 + copy * 101) % 2_000)
                requests.append(JobRequest(worker, {"outcome": outcome, "payload": payload}, queue="soak"))
    return requests


def _median_between(samples: list[tuple[float, float]], start: float, end: float) -> float:
    return statistics.median([rss for at, rss in samples if start <= at < end] or [float("nan")])


async def soak(settings: Settings) -> Figures:
    if settings.engine != "postgres":
        raise SystemExit("the soak runs on PostgreSQL")
    minutes = settings.minutes if settings.minutes is not None else SOAK_MINUTES
    duration = minutes * 60
    warmup = min(300.0, duration / 3)
    window = min(60.0, duration / 3)
    node_settings = {"prune_max_age": 60, "prune_interval": 15}
    samples: list[tuple[float, float]] = []
    by_minute: list[float] = []
    async with fresh_app(settings) as app:
        prefix = (await app.engine()).prefix  # type: ignore[attr-defined]
        async with probe_node(settings.dsn, prefix, {"soak": 20}, node_settings) as node:
            started = time.monotonic()
            next_sample = next_minute = 0.0
            round_number = 0
            while (elapsed := time.monotonic() - started) < duration:
                await app.enqueue_many(_soak_requests(round_number))
                round_number += 1
                if elapsed >= next_sample:
                    samples.append((elapsed, rss_mb(node.pid)))
                    next_sample += SOAK_SAMPLE
                if elapsed >= next_minute + 60:
                    next_minute += 60
                    await _report_minute(settings.dsn, prefix, int(next_minute // 60), samples, by_minute)
                await asyncio.sleep(max(0.0, started + round_number - time.monotonic()))
            samples.append((time.monotonic() - started, rss_mb(node.pid)))
            await _report_minute(settings.dsn, prefix, round(duration / 60, 1), samples, by_minute)
            states = await _states(settings.dsn, prefix)
            peak = peak_rss_mb(node.pid)
    baseline = _median_between(samples, warmup, warmup + window)
    final = _median_between(samples, duration - window, duration + 1)
    figures: Figures = {
        "minutes": minutes,
        "jobs_enqueued": round_number * len(_soak_requests(0)),
        "states_at_end": states,
        "rss_by_minute_mb": by_minute,
        "rss_after_warmup_mb": round(baseline, 1),
        "rss_at_end_mb": round(final, 1),
        "growth_mb": round(final - baseline, 1),
        "peak_rss_mb": round(peak, 1),
        "tolerance_mb": SOAK_TOLERANCE_MB,
    }
    if final - baseline > SOAK_TOLERANCE_MB:
        figures["exceeded"] = (
            f"the node's RSS grew {final - baseline:.1f} MiB after warm-up over {minutes:g} minutes "
            f"(tolerance {SOAK_TOLERANCE_MB:.0f} MiB)"
        )
    return figures


async def _report_minute(
    dsn: str, prefix: str, minute: float, samples: list[tuple[float, float]], by_minute: list[float]
) -> None:
    rss = samples[-1][1]
    by_minute.append(round(rss, 1))
    states = await _states(dsn, prefix)
    ended = ", ".join(f"{state} {count}" for state, count in sorted(states.items()))
    print(f"soak minute {minute:g}: node RSS {rss:.1f} MiB; jobs: {ended}", file=sys.stderr, flush=True)
