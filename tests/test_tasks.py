"""Stopping a background task never swallows the stopper's own cancellation (conveyor._tasks.join)."""

from __future__ import annotations

import asyncio

import pytest

from conveyor._runtime.service import Service
from conveyor._tasks import join


class _SlowTick(Service):
    """A service whose tick takes until it is cancelled (a tick blocked on a dead database)."""

    name = "slow"

    def __init__(self) -> None:
        super().__init__(interval=None)
        self.ticking = asyncio.Event()

    async def tick(self) -> None:
        self.ticking.set()
        await asyncio.Event().wait()


async def test_a_task_cancelled_while_it_stops_a_service_is_cancelled() -> None:
    service = _SlowTick()
    await service.start()
    await service.ticking.wait()
    stopper = asyncio.create_task(service.stop())
    await asyncio.sleep(0)  # the stopper now awaits the service's task
    stopper.cancel()
    # Before join(), the stopper swallowed its own cancellation and ended as if it had stopped
    # the service: an event loop's shutdown waiting on such a task could wait forever.
    with pytest.raises(asyncio.CancelledError):
        await stopper
    assert stopper.cancelled()


async def test_joining_a_task_cancelled_by_someone_else_returns() -> None:
    task = asyncio.create_task(asyncio.Event().wait())
    await asyncio.sleep(0)
    task.cancel()
    await join(task)  # the task's own cancellation is what stopping it means
    assert task.cancelled()


async def test_a_task_that_fails_passes_its_error_on() -> None:
    async def fail() -> None:
        raise ValueError("broken")

    with pytest.raises(ValueError, match="broken"):
        await join(asyncio.create_task(fail()))
