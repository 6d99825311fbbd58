"""Jobs the runtime scenarios run (``_runtime.py``). They live in a module of their own so a node, and
the spawned processes of its process pool, can import them again by the worker name stored in the
row (``bench_jobs.noop`` and so on: ``run.py`` runs with this folder first on ``sys.path``).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from conveyor import Cancel, Discard, Record, Snooze, current_job, job

#: ``mark`` jobs' start times (``time.perf_counter()``), by their ``n``. Same process only.
STARTED: dict[int, float] = {}


@job
async def noop(n: int = 0, tenant: str | None = None) -> None:
    """Does nothing: what is left is the cost of Conveyor itself."""


@job
async def mark(n: int) -> None:
    """Notes when it started, first thing, for the latency scenario."""
    STARTED[n] = time.perf_counter()


def spin(loops: int) -> int:
    """Pure-Python work that holds the GIL: ``loops`` additions and multiplications."""
    total = 0
    for i in range(loops):
        total += i * i
    return total


@job(queue="cpu", executor="process")
def burn(loops: int) -> int:
    """CPU-bound work in a process of the pool."""
    return spin(loops)


@job(queue="cpu", executor="process")
def pause(seconds: float) -> None:
    """Sleeps in a process of the pool: warming up every process at once (imports, first job)."""
    time.sleep(seconds)


@job(record=True)
async def echo(n: int) -> int:
    """Returns its argument as its recorded result: the relay scenario's round trip."""
    return n


@job
async def nap(seconds: float) -> None:
    """Waits without holding anything: a node can run a thousand at once (the memory guard)."""
    await asyncio.sleep(seconds)


# -- the soak: every way a job can end, on the event loop and in threads ---------------------------
#: The ``outcome`` argument of the soak jobs, and how each ends.
SOAK_OUTCOMES = ("complete", "retry", "snooze", "cancel", "discard", "record")


def _soak_end(outcome: str, payload: str) -> Any:
    """What a soak job returns (or raises): its first attempt fails for "retry", its first run
    snoozes for "snooze"; the second ends well."""
    context = current_job()
    if outcome == "retry" and context.job.attempt == 1:
        raise RuntimeError(f"soak failure carrying {len(payload)} characters")
    if outcome == "snooze" and not context.job.meta.get("snoozed"):
        return Snooze(0.2, meta={"snoozed": True})
    if outcome == "cancel":
        return Cancel("soak: cancelled")
    if outcome == "discard":
        return Discard("soak: discarded")
    if outcome == "record":
        return Record({"payload": payload, "size": len(payload)})
    return None


def _soon(_job: Any) -> float:
    return 0.2


@job(queue="soak", backoff=_soon)
async def soak_async(outcome: str, payload: str) -> Any:
    return _soak_end(outcome, payload)


@job(queue="soak", backoff=_soon)
def soak_thread(outcome: str, payload: str) -> Any:
    return _soak_end(outcome, payload)


#: The ``n`` of every ``tally`` job this process ran (``drain-nodes`` checks each ran exactly once).
RAN: list[int] = []


@job
async def tally(n: int) -> None:
    """A no-op that notes its ``n``: runs are counted across the node processes of ``drain-nodes``."""
    RAN.append(n)
