"""Jobs the relay tests run: progress, signals, waiting (importable by name, also from spawned
processes and from ``conveyor start`` nodes)."""

from __future__ import annotations

import asyncio
import math
from typing import Any

from conveyor import (
    Cancel,
    ConveyorError,
    Discard,
    Record,
    SignalTimeoutError,
    ValidationError,
    current_job,
    job,
    progress,
    progress_sync,
    receive,
    receive_sync,
    signals,
    wait_for_signal,
    wait_for_signal_sync,
)


@job(record=True)
async def doubled(value: int) -> int:
    return value * 2


@job(record=True)
async def sleeps(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "slept"


@job()
async def cancels_itself() -> Cancel:
    return Cancel("no longer wanted")


@job()
async def discards_itself() -> Discard:
    return Discard("bad input")


# The retry waits 2 s: long enough for a wait without through_retries to see the failed attempt (with
# no backoff the second attempt could complete first, and that wait returned the completed job).
@job(max_attempts=3, backoff=lambda job: 2)
async def fails_once() -> Record:
    if current_job().attempt == 1:
        raise RuntimeError("first attempt fails")
    return Record("second attempt")


@job(record=True)
async def reports_concurrently(coroutines: int) -> int:
    """Many coroutines of one job report different fields at once; then it waits to be released."""

    async def part(i: int) -> None:
        for step in range(5):
            await progress(**{f"part{i}": step})
            await asyncio.sleep(0)

    await asyncio.gather(*(part(i) for i in range(coroutines)))
    await progress(phase="reported")
    message = await receive(timeout=30)
    return int(message["release"])


@job(record=True)
def reports_in_a_tight_loop(count: int) -> int:
    for i in range(count):
        progress_sync(done=i + 1, total=count)
    return count


@job(record=True, executor="process")
def reports_from_a_process(count: int) -> int:
    for i in range(count):
        progress_sync(done=i + 1, total=count, phase="crunching")
    return count


@job(record=True)
async def refuses_bad_progress() -> list[str]:
    """Each bad report raises ValidationError naming what is wrong; nothing of it is kept."""
    problems = []
    for bad in ({"ratio": math.nan}, {"when": object()}, {"blob": "x" * 9000}, {}):
        try:
            await progress(**bad)
        except ValidationError as exc:
            problems.append(str(exc))
    await progress(ok=True)
    return problems


@job(record=True)
async def echoes_messages(count: int) -> list[Any]:
    return [await receive(timeout=30) for _ in range(count)]


@job(record=True)
def echoes_in_a_thread() -> Any:
    return receive_sync(timeout=30)


@job(record=True)
async def iterates_messages() -> list[Any]:
    return [message async for message in signals(timeout=0.3)]


@job(record=True)
async def receive_times_out() -> str:
    try:
        await receive(timeout=0.2)
    except SignalTimeoutError as exc:
        return f"timed out: {exc}"
    return "received"


@job(record=True)
async def awaits_two_decisions() -> list[Any]:
    """Waits (off its slot) for two messages, one after the other; each run replays the first."""
    first = await wait_for_signal(timeout=60)
    second = await wait_for_signal(timeout=60)
    return [first, second, current_job().meta.get("snoozed")]


@job(record=True)
def awaits_in_a_thread() -> Any:
    return wait_for_signal_sync(timeout=60)


@job(record=True, executor="process")
def awaits_in_a_process() -> Any:
    return wait_for_signal_sync(timeout=60)


@job(record=True)
async def awaits_briefly(seconds: float) -> str:
    try:
        await wait_for_signal(timeout=seconds)
    except SignalTimeoutError:
        return "gave up"
    return "decided"


@job(record=True, executor="process")
def process_receive() -> str:
    try:
        receive_sync(timeout=1)
    except ConveyorError as exc:
        return str(exc)
    return "received"
