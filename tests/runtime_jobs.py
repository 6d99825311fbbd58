"""Jobs the runtime tests run. They live in an importable module so nodes (and the spawned worker
processes, which import jobs by name) can resolve them from the ``worker`` column.

Jobs that run in the test's own process (async and thread executors) report what they saw through
``RUNS`` and ``EVENTS``, keyed by a ``key`` argument unique to each test.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from collections import defaultdict
from typing import Any

from conveyor import Cancel, Discard, Job, Record, Snooze, current_job, job, worker
from conveyor.outcomes import Outcome

#: Job ids in the order their runs finished, per test key.
RUNS: defaultdict[str, list[int]] = defaultdict(list)
#: Anything else a job wants a test to see, per test key.
EVENTS: dict[str, Any] = {}


def describe_current() -> dict[str, Any]:
    """What ``current_job()`` says about the running job, as a recordable value."""
    context = current_job()
    return {
        "id": context.id,
        "attempt": context.attempt,
        "tags": list(context.tags),
        "meta": dict(context.meta),
        "pid": os.getpid(),
        "thread": threading.current_thread().name,
    }


# -- completing -----------------------------------------------------------------------------------
@job(record=True)
async def add(a: int, b: int) -> int:
    await asyncio.sleep(0)
    return a + b


@job(record=True)
def multiply_in_thread(a: int, b: int) -> dict[str, Any]:
    return {"product": a * b, "thread": threading.current_thread().name}


@job
async def record_value(value: Any) -> Record:
    return Record(value)


@job
def record_value_in_thread(value: Any) -> Record:
    return Record(value)


@worker(record=True, queue="default")
class Greeter:
    def process(self, job: Job) -> str:
        return f"hello {job.args['name']}"


@worker()
class AsyncGreeter:
    async def process(self, job: Job) -> Record:
        return Record({"greeting": f"hi {job.args['name']}", "attempt": job.attempt})


# -- failing --------------------------------------------------------------------------------------
@job(max_attempts=3)
async def fail(message: str) -> None:
    raise ValueError(message)


def fixed_backoff(job: Job) -> float:
    return 123.0


@job(backoff=fixed_backoff)
async def fail_with_backoff(message: str) -> None:
    raise RuntimeError(message)


@job
async def raise_own_timeout_error() -> None:
    """A job whose own code raises TimeoutError (no job timeout configured)."""
    raise TimeoutError("the upstream service timed out")


@job
def raise_own_timeout_error_in_thread() -> None:
    raise TimeoutError("the upstream service timed out")


# -- outcomes -------------------------------------------------------------------------------------
@job
async def snoozer(times: int, seconds: float, raised: bool) -> Snooze | str:
    """Snooze until the job has been snoozed ``times`` times, then complete."""
    snoozed = int(str(current_job().meta.get("snoozed", 0)))
    if snoozed < times:
        if raised:
            raise Snooze(seconds)
        return Snooze(seconds)
    return "done"


def _ending(kind: str, reason: str) -> Outcome:
    return Cancel(reason) if kind == "cancel" else Discard(reason)


@job
async def ender(kind: str, reason: str, raised: bool) -> Outcome:
    outcome = _ending(kind, reason)
    if raised:
        await asyncio.sleep(0)
        raise outcome
    return outcome


@job
def ender_in_thread(kind: str, reason: str, raised: bool) -> Outcome:
    outcome = _ending(kind, reason)
    if raised:
        raise outcome
    return outcome


@job(executor="process")
def snoozer_in_process(seconds: float) -> Snooze:
    return Snooze(seconds)


@job(executor="process")
def ender_in_process(kind: str, reason: str, raised: bool) -> Outcome:
    outcome = _ending(kind, reason)
    if raised:
        raise outcome
    return outcome


# -- timeouts -------------------------------------------------------------------------------------
@job(timeout=0.3)
async def slow_async(seconds: float) -> None:
    await asyncio.sleep(seconds)


@job(timeout=0.3)
def thread_waits_for_cancel(key: str) -> None:
    """Loops until told it is cancelled (or 5 s pass), then reports what it saw."""
    context = current_job()
    deadline = time.monotonic() + 5
    while not context.is_cancelled() and time.monotonic() < deadline:
        time.sleep(0.01)
    EVENTS[key] = {"cancelled": context.is_cancelled(), "reason": context.cancel_reason}


# -- current_job() --------------------------------------------------------------------------------
@job(record=True)
async def context_async() -> dict[str, Any]:
    await asyncio.sleep(0)
    return describe_current()


@job(record=True)
def context_thread() -> dict[str, Any]:
    return describe_current()


@job(record=True, executor="process")
def context_process() -> dict[str, Any]:
    return describe_current()


# -- executors ------------------------------------------------------------------------------------
@job(queue="blocking")
def blocking_sleep(key: str, seconds: float) -> None:
    EVENTS[key] = time.monotonic()
    time.sleep(seconds)


@job
async def mark_started(key: str) -> None:
    """Records when it started (monotonic clock of the test process) and its id."""
    EVENTS[key] = time.monotonic()
    RUNS[key].append(current_job().id)


@job(record=True, executor="process")
def process_pid() -> int:
    return os.getpid()


@job(executor="process")
def process_crash() -> None:
    os._exit(1)


@job(record=True, executor="process")
def process_modules(names: list[str]) -> list[str]:
    """Which of ``names`` the worker process has imported."""
    return [name for name in names if name in sys.modules]


@job(record=True, executor="process")
def process_echo(text: str, times: int) -> str:
    return text * times


@job(executor="process")
def process_sleep(seconds: float) -> None:
    time.sleep(seconds)


# -- load and shutdown ----------------------------------------------------------------------------
@job
async def short_run(key: str, ms: float) -> None:
    await asyncio.sleep(ms / 1000)
    RUNS[key].append(current_job().id)


@job
async def noop(key: str) -> None:
    RUNS[key].append(current_job().id)


@job
async def long_sleep(key: str, seconds: float) -> None:
    EVENTS[key] = "started"
    await asyncio.sleep(seconds)
    EVENTS[key] = "finished"


@job
async def counted_sleep(key: str, seconds: float) -> None:
    """Appends its id to ``RUNS[key]`` when it starts, then sleeps."""
    RUNS[key].append(current_job().id)
    await asyncio.sleep(seconds)


@job
async def claimed_elsewhere_when_stopped(key: str, dsn: str, prefix: str) -> None:
    """Runs until stopped; on its way out, plays another node that claimed the same attempt of this
    job (what an undone claim allows): the row says executing, attempt 1, another producer."""
    job_id = current_job().id
    EVENTS[key] = "running"
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        import psycopg
        from psycopg import sql

        query = sql.SQL(
            "UPDATE {}.oban_jobs SET state = 'executing', attempt = 1,"
            " attempted_by = ARRAY['other-node', 'other-producer'] WHERE id = %s"
        ).format(sql.Identifier(prefix))
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            await conn.execute(query, (job_id,))
        EVENTS[key] = "stopped"
        raise
