"""A sleep that another task can cut short, for the loops of the hot path (producers, acker)."""

from __future__ import annotations

import asyncio

from conveyor._runtime.clock import SYSTEM_CLOCK, Clock


class Alarm:
    """``await alarm.sleep(seconds)`` until ``alarm.ring()`` or the time passes.

    A bare future resolved by ``ring`` or by a timer, rather than an ``asyncio.Event`` awaited
    through ``wait_for``: wait_for makes a task per sleep and needs three loop turns from the wake-up
    to the sleeper running again, where this needs one. A busy node sleeps and wakes hundreds of
    times a second. One task sleeps on an alarm at a time.
    """

    __slots__ = ("_clock", "_waiter")

    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self._clock = clock
        self._waiter: asyncio.Future[None] | None = None

    @property
    def sleeping(self) -> bool:
        return self._waiter is not None

    @property
    def waiting(self) -> bool:
        """Asleep, and nothing has ended the sleep yet (no ring, no timer come due)."""
        return self._waiter is not None and not self._waiter.done()

    def ring(self) -> None:
        """End the current sleep, if any (a ring with nobody asleep is not remembered)."""
        _resolve(self._waiter)

    async def sleep(self, seconds: float | None) -> None:
        """Until ``ring()`` or ``seconds`` pass (None: until rung)."""
        waiter = self._waiter = asyncio.get_running_loop().create_future()
        timer = None if seconds is None else self._clock.call_later(seconds, lambda: _resolve(waiter))
        try:
            await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()


def _resolve(waiter: asyncio.Future[None] | None) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(None)
