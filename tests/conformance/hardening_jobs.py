"""Jobs that attack the node that runs them: poisoned acks, escaping BaseExceptions, odd errors.

Importable by name (the tests enqueue them on both engines); each says what it does to the node.
"""

from __future__ import annotations

import asyncio
import threading
import time

from conveyor import Snooze, current_job, job


@job(queue="default")
async def quick(n: int) -> int:
    return n


@job(queue="default")
async def snoozes_over_junk_meta() -> Snooze | None:
    """Enqueued with ``meta={"snoozed": "x"}``: the snooze count must not cast "x"."""
    return None if current_job().meta.get("snoozed") == 1 else Snooze(0)


@job(queue="default", max_attempts=3, backoff=lambda job: 1e13)
async def huge_backoff() -> None:
    raise RuntimeError("fails with a backoff of 1e13 seconds")


@job(queue="default", max_attempts=3, backoff=lambda job: float("inf"))
async def infinite_backoff() -> None:
    raise RuntimeError("fails with an infinite backoff")


@job(queue="default", max_attempts=3, backoff=lambda job: float("nan"))
async def nan_backoff() -> None:
    raise RuntimeError("fails with a NaN backoff")


@job(queue="default", max_attempts=1)
async def nul_error() -> None:
    raise ValueError("bad\x00byte")


@job(queue="default", max_attempts=1)
async def surrogate_error() -> None:
    raise ValueError("lone \ud800 surrogate")


@job(queue="default", max_attempts=1)
async def huge_error() -> None:
    raise ValueError("head " + "x" * 200_000 + " tail")


class CustomBase(BaseException):
    """A BaseException that is none of Python's own."""


ESCAPES: dict[str, type[BaseException]] = {
    "SystemExit": SystemExit,
    "KeyboardInterrupt": KeyboardInterrupt,
    "GeneratorExit": GeneratorExit,
    "CancelledError": asyncio.CancelledError,
    "CustomBase": CustomBase,
}


@job(queue="default", max_attempts=1)
async def async_escape(kind: str) -> None:
    """Raises the named BaseException from a coroutine on the node's loop."""
    raise ESCAPES[kind]("raised by job code")


@job(queue="default", max_attempts=1)
def thread_escape(kind: str) -> None:
    """Raises the named BaseException from a job thread."""
    time.sleep(0.01)
    raise ESCAPES[kind]("raised by job code")


@job(queue="default", max_attempts=1, executor="process")
def process_escape(kind: str) -> None:
    """Raises the named BaseException in a worker process."""
    raise ESCAPES[kind]("raised by job code")


#: Set by a test to let ``waits_for_release`` finish (jobs on the loop share the test's process).
RELEASE: dict[str, asyncio.Event] = {}


@job(queue="default")
async def waits_for_release(key: str) -> str:
    """Runs until the test sets ``RELEASE[key]``: a job as long as the test wants, in no real time."""
    await RELEASE.setdefault(key, asyncio.Event()).wait()
    return key


@job(queue="default", timeout=30, max_attempts=1)
async def outlives_its_timeout() -> None:
    """Never finishes on its own: only its 30 s timeout (on the node's clock) ends it."""
    await asyncio.Event().wait()


@job(queue="default", timeout=30, max_attempts=1, executor="process")
def process_outlives_its_timeout() -> None:
    """A process job past its 30 s timeout: the pool kills its process (an hour is never reached)."""
    time.sleep(3600)


@job(queue="default", timeout=30, max_attempts=1)
def thread_outlives_its_timeout() -> None:
    """A thread job past its 30 s timeout: it stops once told (or after 5 real seconds)."""
    deadline = time.monotonic() + 5
    while not current_job().is_cancelled() and time.monotonic() < deadline:
        time.sleep(0.01)


#: Set by a test to let ``thread_ignores_cancel`` return (created by the test before it enqueues).
THREAD_RELEASE: dict[str, threading.Event] = {}
#: What the cancel tests' jobs did, in order: ("start" | "end", key, n).
RUNS: list[tuple[str, str, int]] = []


@job(queue="default")
def thread_ignores_cancel(key: str, n: int) -> None:
    """A blocking job that never looks at its cancel flag: it runs until the test releases it."""
    RUNS.append(("start", key, n))
    THREAD_RELEASE[key].wait(30)
    RUNS.append(("end", key, n))


@job(queue="default")
def thread_records(key: str, n: int) -> None:
    RUNS.append(("start", key, n))
    RUNS.append(("end", key, n))
