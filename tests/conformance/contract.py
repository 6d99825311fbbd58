"""Helpers of the conformance suite: they drive an engine through the Engine API only."""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from conveyor import Job, JobFilter, JobRequest, JobState
from conveyor.acks import Ack
from conveyor.engine.base import Engine
from conveyor.limits import FetchLimits
from tests.helpers import poll

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
NODE, PRODUCER = "node-1", "00000000-0000-4000-8000-000000000001"
WORKER = "tests.w.Job"
ERROR = {"attempt": 1, "at": T0.isoformat(), "error": "boom"}
#: Every state, and the final ones.
STATES = tuple(JobState)
FINAL = (JobState.COMPLETED, JobState.DISCARDED, JobState.CANCELLED)

_early = itertools.count()


def req(**options: Any) -> JobRequest:
    args = options.pop("args", {"n": 1})
    return JobRequest(worker=options.pop("worker", WORKER), args=args, **options)


def uid(n: int) -> str:
    """A producer uuid."""
    return f"00000000-0000-4000-8000-{n:012x}"


async def fetch(
    engine: Engine,
    queue: str = "default",
    demand: int = 10,
    now: datetime = T0,
    producer: str = PRODUCER,
    node: str = NODE,
) -> list[int]:
    jobs = await engine.fetch_jobs(queue, demand, node=node, producer=producer, now=now)
    return [j.id for j in jobs]


async def job(engine: Engine, job_id: int) -> Any:
    """The job, which must exist (typed loosely so tests read its fields without narrowing)."""
    found = await engine.get_job(job_id)
    assert found is not None, job_id
    return found


async def put(
    engine: Engine,
    state: JobState,
    *,
    now: datetime = T0,
    producer: str = PRODUCER,
    **options: Any,
) -> int:
    """Insert one job and bring it into ``state`` through the Engine API (at ``now``).

    Jobs that must be claimed first are scheduled earlier than anything else in their queue, so the
    fetch of demand 1 takes exactly this one.
    """
    if state is JobState.SCHEDULED:
        options.setdefault("scheduled_at", now + timedelta(hours=1))
        (job_id,) = await engine.insert([req(**options)], now=now)
        return job_id
    if state is JobState.AVAILABLE:
        (job_id,) = await engine.insert([req(**options)], now=now)
        return job_id
    options.setdefault("priority", 0)
    options["scheduled_at"] = T0 - timedelta(days=3650, seconds=next(_early))
    (job_id,) = await engine.insert([req(**options)], now=now)
    queue = options.get("queue", "default")
    assert await fetch(engine, queue, 1, now=now, producer=producer) == [job_id]
    if state is not JobState.EXECUTING:
        ack = Ack(job_id, 1, state, schedule_in=3600 if state is JobState.RETRYABLE else None, error=ERROR)
        assert await engine.ack_jobs([ack], now=now) == [job_id]
    return job_id


class Heard:
    """A notification handler that records what arrives, in order."""

    def __init__(self) -> None:
        self.items: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, channel: str, payload: dict[str, Any]) -> None:
        self.items.append((channel, payload))

    def on(self, channel: str) -> list[dict[str, Any]]:
        return [payload for name, payload in self.items if name == channel]

    async def wait_for(self, channel: str, payload: dict[str, Any], timeout: float = 5.0) -> None:
        await poll(
            lambda: self.items,
            lambda items: (channel, payload) in items,
            timeout=timeout,
            what=f"{channel} {payload}",
            every=0.005,
        )


@asynccontextmanager
async def listening(engine: Engine, channels: list[str]) -> AsyncIterator[Heard]:
    """Everything said on ``channels`` while the block runs (listening has begun when it starts)."""
    heard = Heard()
    listener = await engine.listen(channels, heard)
    try:
        await heard.wait_for("listener", {"event": "connected"})
        yield heard
    finally:
        await listener.stop()


async def settle(engine: Engine, heard: Heard, marker: int = 0) -> None:
    """Send a marker on the signal channel and wait for it: what was sent before has arrived."""
    payload = {"action": "marker", "n": marker}
    await engine.notify("signal", payload)
    await heard.wait_for("signal", payload)


async def claim_and_ack_at_random(
    engines: Sequence[Engine],
    limits: FetchLimits,
    check: Callable[[list[Job]], None],
    *,
    seed: int,
    most: int = 4,
) -> list[int]:
    """Two producers per engine claim (demand 1..``most``) and ack at random moments until the queue
    stays empty; after each claim ``check`` sees every executing job. The ids acked, in order."""
    done: list[int] = []
    rng = random.Random(seed)

    async def producer(engine: Engine, n: int) -> None:
        idle_rounds = 0
        while idle_rounds < 20:
            jobs = await engine.fetch_jobs(
                "default", rng.randint(1, most), node=f"node-{n}", producer=uid(n), now=T0, limits=limits
            )
            check(await engine.list_jobs(JobFilter(states=(JobState.EXECUTING,), limit=1000)))
            idle_rounds = 0 if jobs else idle_rounds + 1
            await asyncio.sleep(rng.random() / 500)
            if jobs:
                await engine.ack_jobs([Ack(j.id, 1, JobState.COMPLETED) for j in jobs], now=T0)
                done.extend(j.id for j in jobs)
            await asyncio.sleep(0)

    await asyncio.gather(*(producer(e, n) for n, e in enumerate(list(engines) * 2, start=1)))
    return done
