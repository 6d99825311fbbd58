"""Jobs with one known outcome each, for the telemetry and job-log tests (enqueued by name on both
engines)."""

from __future__ import annotations

import asyncio
import time

from conveyor import Cancel, Discard, Snooze, job


@job(queue="default")
async def completes(n: int) -> int:
    return n


@job(queue="default")
def completes_in_thread(n: int) -> int:
    time.sleep(0.01)
    return n


@job(queue="default")
async def snoozes() -> Snooze:
    return Snooze(60)


@job(queue="default")
async def cancels() -> Cancel:
    return Cancel("not needed any more")


@job(queue="default")
async def discards() -> None:
    raise Discard("the input is bad")


@job(queue="default", max_attempts=3)
async def fails() -> None:
    raise ValueError("boom")


@job(queue="default", max_attempts=1)
async def fails_finally() -> None:
    raise KeyError("gone")


@job(queue="default", max_attempts=2, timeout=0.2)
async def times_out() -> None:
    await asyncio.sleep(30)


@job(queue="default")
async def sleeps(seconds: float) -> None:
    await asyncio.sleep(seconds)


#: Set by ``cleans_up`` when its clean-up after a cancel ran to the end.
CLEANED: asyncio.Event | None = None
#: Set by ``cleans_up`` when its clean-up has begun.
CLEANING: asyncio.Event | None = None


@job(queue="default")
async def cleans_up() -> None:
    try:
        await asyncio.sleep(30)
    except asyncio.CancelledError:
        assert CLEANED is not None and CLEANING is not None
        CLEANING.set()
        await asyncio.sleep(0.05)  # the job's own clean-up awaits something
        CLEANED.set()
        raise


@job(queue="default", executor="process", max_attempts=3)
def fails_in_process() -> None:
    raise ValueError("far away")
