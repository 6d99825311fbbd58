"""The runtime's sense of time: one injectable clock for every service of a node.

Every loop of a node (producers, stager, heartbeat, leadership, the leader's duties, the acker)
waits and reads the time through a ``Clock``. ``SystemClock`` is the real one: the event loop's
timers, and ``None`` as the ``now`` of engine calls, so the database's own clock (one clock for the
whole fleet) decides what is due, stale or expired. ``FakeClock`` is for tests: time stands still
until the test moves it, and then every timer that comes due fires in order and every engine call
is given the fake time, so rescue after a dead producer, a leader's expiry, cron ticks and pruning
ages are tested in milliseconds instead of minutes.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Any, Protocol


class Timer(ABC):
    @abstractmethod
    def cancel(self) -> None:
        """Keep the callback from running (harmless once it has run)."""


class Clock(ABC):
    """Wall time, a monotonic time, and timers, as one node sees them."""

    @abstractmethod
    def now(self) -> datetime:
        """The current wall time, timezone-aware UTC."""

    @abstractmethod
    def database_now(self) -> datetime | None:
        """The ``now`` to give engine calls: None means the database's own clock."""

    @abstractmethod
    def monotonic(self) -> float:
        """Seconds from an arbitrary start, never going back: for measuring durations."""

    @abstractmethod
    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        """Run ``callback`` (on the event loop) once ``delay`` seconds have passed."""

    def timeout(self, seconds: float) -> Deadline:
        """An ``async with`` block that this clock cancels after ``seconds``: it then raises
        ``TimeoutError``, and its ``expired()`` tells that timeout from one raised inside."""
        return _ClockDeadline(self, seconds)

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` on this clock."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not waiter.done():
                waiter.set_result(None)

        timer = self.call_later(seconds, wake)
        try:
            await waiter
        finally:
            timer.cancel()


class Deadline(Protocol):
    """What ``Clock.timeout`` returns (``asyncio.Timeout`` is one)."""

    async def __aenter__(self) -> Any: ...

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None: ...

    def expired(self) -> bool: ...


class _ClockDeadline:
    """``asyncio.timeout`` on any clock: when the clock's timer fires, the task is cancelled, and that
    cancellation (only that one) leaves the block as ``TimeoutError``."""

    def __init__(self, clock: Clock, seconds: float) -> None:
        self._clock = clock
        self._seconds = seconds
        self._expired = False
        self._task: asyncio.Task[Any] | None = None
        self._timer: Timer | None = None

    def expired(self) -> bool:
        return self._expired

    def _expire(self) -> None:
        self._expired = True
        if self._task is not None:
            self._task.cancel()

    async def __aenter__(self) -> _ClockDeadline:
        self._task = asyncio.current_task()
        self._timer = self._clock.call_later(self._seconds, self._expire)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        if self._timer is not None:
            self._timer.cancel()
        cancelled = exc_type is not None and issubclass(exc_type, asyncio.CancelledError)
        if self._expired and cancelled and self._task is not None and self._task.uncancel() == 0:
            raise TimeoutError from exc
        return None


class _LoopTimer(Timer):
    __slots__ = ("_handle",)

    def __init__(self, handle: asyncio.TimerHandle) -> None:
        self._handle = handle

    def cancel(self) -> None:
        self._handle.cancel()


class SystemClock(Clock):
    """Real time: the event loop's timers, and the database's clock for engine calls."""

    def now(self) -> datetime:
        """The current wall time, timezone-aware UTC."""
        return datetime.now(UTC)

    def database_now(self) -> datetime | None:
        """None: engine calls use the database's own clock."""
        return None

    def monotonic(self) -> float:
        """``time.monotonic()``: what asyncio's own loops read too. Not ``loop.time()``: on Python
        3.11 finding the running loop costs a ``getpid`` system call, and a run reads this twice."""
        return time.monotonic()

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        """Run ``callback`` on the event loop once ``delay`` seconds have passed."""
        return _LoopTimer(asyncio.get_running_loop().call_later(delay, callback))

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` (``asyncio.sleep``)."""
        await asyncio.sleep(seconds)

    def timeout(self, seconds: float) -> Deadline:
        """``asyncio.timeout(seconds)``."""
        return asyncio.timeout(seconds)


@dataclass(order=True)
class _FakeTimer(Timer):
    due: float
    order: int
    callback: Callable[[], None] = field(compare=False)
    cancelled: bool = field(default=False, compare=False)

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock(Clock):
    """Time that moves only when a test calls ``advance``.

    Timers fire in the order they come due, each at its own moment (``now()`` reads that moment
    while it runs). Engine calls get the fake time as their ``now``, so the database agrees with the
    node about what time it is; several nodes (and the test) can share one fake clock.
    """

    def __init__(self, start: datetime | None = None) -> None:
        start = start or datetime.now(UTC)
        if start.tzinfo is None:
            raise ValueError("FakeClock needs a timezone-aware start")
        self._start = start.astimezone(UTC)
        self._elapsed = 0.0
        self._timers: list[_FakeTimer] = []
        self._order = itertools.count()

    def now(self) -> datetime:
        """The fake wall time: the start plus the seconds ``advance`` has moved."""
        return self._start + timedelta(seconds=self._elapsed)

    def database_now(self) -> datetime | None:
        """The fake time too, so the database agrees with the node about what time it is."""
        return self.now()

    def monotonic(self) -> float:
        """Seconds ``advance`` has moved since the clock was made."""
        return self._elapsed

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        """Run ``callback`` when ``advance`` reaches ``delay`` seconds from now."""
        timer = _FakeTimer(self._elapsed + max(0.0, delay), next(self._order), callback)
        heapq.heappush(self._timers, timer)
        return timer

    async def advance(self, seconds: float) -> None:
        """Move time ``seconds`` forward, firing every timer due on the way, in order; after each,
        let the event loop run what it woke before time moves on."""
        target = self._elapsed + seconds
        while self._timers and self._timers[0].due <= target:
            timer = heapq.heappop(self._timers)
            if timer.cancelled:
                continue
            self._elapsed = max(self._elapsed, timer.due)
            timer.callback()
            for _ in range(3):  # the woken task, then what it scheduled in turn
                await asyncio.sleep(0)
        self._elapsed = target


#: The clock every service uses unless given another.
SYSTEM_CLOCK: Clock = SystemClock()
