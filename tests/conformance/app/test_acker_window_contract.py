"""The acker's gathering window: ``ack_delay`` for a lone result or a trickle, stretched towards
``ack_max_delay`` while results come fast, so a busy node writes fewer, fuller statements. Run on
every engine (acks of ids that do not exist apply to nothing, and cost the same statement)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime

from conveyor._runtime.acker import Acker
from conveyor._runtime.clock import FakeClock
from conveyor.acks import Ack
from conveyor.engine.base import Engine
from conveyor.job import JobState
from tests.helpers import poll


class CountingEngine:
    """The engine, with the size of every ack statement it was given recorded."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.batches: list[int] = []

    async def ack_jobs(
        self, acks: Sequence[Ack], *, now: datetime | None = None, node: str | None = None
    ) -> list[int]:
        self.batches.append(len(acks))
        return await self.engine.ack_jobs(acks, now=now, node=node)

    def is_transient(self, exc: BaseException) -> bool:
        return self.engine.is_transient(exc)


async def steady_flow(
    acker: Acker, bursts: int, per_burst: int, first_id: int, clock: FakeClock | None = None
) -> None:
    """``per_burst`` acks every millisecond or so, as a node of many short jobs sends them (on
    ``clock`` too, when the acker times its rate on a fake one)."""
    job_id = first_id
    for _ in range(bursts):
        for _ in range(per_burst):
            acker.push(Ack(job_id, 1, JobState.COMPLETED))
            job_id += 1
        if clock is not None:
            await clock.advance(0.001)
        await asyncio.sleep(0.001)  # pacing: the acker takes batches between bursts


async def run_flow(engine: Engine, max_delay: float) -> tuple[list[int], Acker]:
    # The rate is timed on a fake clock, 8 acks a millisecond whatever the machine's load: on the
    # real clock a loaded machine slowed the flow, and with it the rate and the stretched window.
    clock = FakeClock()
    counting = CountingEngine(engine)
    acker = Acker(counting, delay=0.002, max_delay=max_delay, clock=clock)  # type: ignore[arg-type]
    await acker.start()
    await steady_flow(acker, bursts=250, per_burst=8, first_id=10**9, clock=clock)
    await asyncio.wait_for(acker.stop(), 10)
    assert acker.written == 2000  # every ack written, stretched or not
    return counting.batches, acker


async def test_a_fast_flow_is_written_in_fewer_fuller_statements(any_engine: Engine) -> None:
    plain, _ = await run_flow(any_engine, max_delay=0.002)  # no stretching: the window is ack_delay
    stretched, acker = await run_flow(any_engine, max_delay=0.02)
    assert sum(plain) == sum(stretched) == 2000
    # At several thousand acks a second the window grows towards 100 acks' worth (capped at 20 ms).
    assert len(stretched) < 0.6 * len(plain), (len(stretched), len(plain))
    assert max(stretched) <= 1000
    assert acker.rate > 1000


async def test_a_lone_ack_or_a_trickle_is_not_held_longer_than_ack_delay(any_engine: Engine) -> None:
    clock = FakeClock()
    acker = Acker(CountingEngine(any_engine), delay=0.002, max_delay=0.02, clock=clock)  # type: ignore[arg-type]
    assert acker.window() == 0.002  # nothing seen yet
    await acker.start()
    try:
        # 40 acks a second of the acker's clock, each written before the next: under 2 expected
        # within max_delay, so no stretching.
        for job_id in range(10):
            acker.push(Ack(10**9 + job_id, 1, JobState.COMPLETED))
            await poll(lambda: acker.written, lambda written: written > job_id, what=f"ack {job_id} written")  # noqa: B023
            await clock.advance(0.025)
        assert 0 < acker.rate < 100
        assert acker.window() == 0.002
    finally:
        await asyncio.wait_for(acker.stop(), 10)


async def test_the_window_shrinks_back_once_the_flow_stops(any_engine: Engine) -> None:
    clock = FakeClock()
    acker = Acker(CountingEngine(any_engine), delay=0.002, max_delay=0.02, clock=clock)  # type: ignore[arg-type]
    await acker.start()
    try:
        await steady_flow(acker, bursts=100, per_burst=8, first_id=10**9, clock=clock)
        await poll(lambda: acker.written, lambda written: written == 800, what="the flow written")
        assert acker.rate > 1000
        assert acker.window() > 0.002  # the flow was fast, and a moment ago
        await clock.advance(0.1)  # under 10 x max_delay without a batch: the rate still holds
        assert acker.window() > 0.002
        await clock.advance(0.15)  # over 10 x max_delay without a batch: the rate is stale
        assert acker.window() == 0.002
    finally:
        await asyncio.wait_for(acker.stop(), 10)
