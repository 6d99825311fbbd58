"""What the metrics exporters (``conveyor.contrib.prometheus``, ``conveyor.contrib.opentelemetry``)
read as gauges: jobs executing per queue on this node, counted from the ``job.*`` events, and the
jobs per queue and state, from ``Conveyor.queue_counts`` kept in a cache.

Where a node of the app runs, a scrape never waits for the database: reading the depth returns the
cached counts and, when they are older than ``max_age``, asks the node's event loop for fresh ones
without waiting for them (at most one query under way; a burst of scrapes costs one query per
``max_age``). They are first read when the node starts.

Where no node runs (a web process that only enqueues, serving ``/metrics``), there is no loop to ask:
a read older than ``max_age`` queries the database itself, through the app's blocking twin
(``queue_counts_sync``), one query at a time (a scrape meanwhile gets the cached counts; the ASGI
endpoint runs it in a worker thread, never on the web server's loop). The figures are the same
either way: they come from the database, not from this process.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from conveyor.stats import QueueCounts

if TYPE_CHECKING:
    from conveyor.app import Conveyor

log = logging.getLogger("conveyor.metrics")

#: Seconds the queue counts are reused before a read asks for fresh ones.
DEFAULT_MAX_AGE = 5.0


class Executing:
    """Jobs running on this node, per queue (from ``job.start`` and the run's end event)."""

    def __init__(self) -> None:
        self.by_queue: dict[str, int] = {}

    def started(self, queue: str) -> None:
        self.by_queue[queue] = self.by_queue.get(queue, 0) + 1

    def ended(self, queue: str) -> None:
        self.by_queue[queue] = self.by_queue.get(queue, 1) - 1

    def snapshot(self) -> dict[str, int]:
        # A copy made under the GIL in one step: the collecting thread never iterates the live dict.
        return dict(self.by_queue)


class QueueDepth:
    """The app's ``queue_counts``, cached for ``max_age`` seconds and refreshed on its node's loop."""

    def __init__(self, app: Conveyor, max_age: float = DEFAULT_MAX_AGE) -> None:
        # Weakly: the exporters are kept per app in weak dictionaries, whose values must not hold it.
        self._app = weakref.ref(app)
        self.max_age = max_age
        self.counts: list[QueueCounts] = []
        self._read_at = -float("inf")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._failed_at = -float("inf")
        #: Held by the one thread reading the counts from the database when no node runs.
        self._reading = threading.Lock()

    def attach(self) -> Callable[[], None]:
        """Follow the app's node (its loop is where counts are read); returns the detach function."""
        app = self._app()
        assert app is not None
        detach_start = app.on("node.start", self._node_started)
        detach_stop = app.on("node.stop", self._node_stopped)

        def detach() -> None:
            detach_start()
            detach_stop()
            self._node_stopped("node.stop", {})

        return detach

    def stale(self) -> bool:
        """The cached counts are older than ``max_age``: the next read asks for fresh ones."""
        return time.monotonic() - self._read_at >= self.max_age

    def read(self) -> list[QueueCounts]:
        """The latest counts. When they are older than ``max_age``: with a node, asks its loop for
        fresh ones (without waiting); without one, reads them from the database now (blocking)."""
        loop = self._loop
        if loop is not None:
            if self._task is None and self.stale():
                try:
                    loop.call_soon_threadsafe(self._refresh_soon)
                except RuntimeError:  # the loop closed meanwhile
                    self._loop = None
            return self.counts
        if self.stale():
            self._read_blocking()
        return self.counts

    def _read_blocking(self) -> None:
        # One reader at a time; the others return the cached counts rather than queue up queries.
        if not self._reading.acquire(blocking=False):
            return
        try:
            app = self._app()
            if app is not None and self._loop is None and self.stale():
                self.counts = app.queue_counts_sync()
        except Exception as exc:
            self._failed(exc)
        finally:
            self._read_at = time.monotonic()
            self._reading.release()

    def _failed(self, exc: Exception) -> None:
        # A scrape shows the last counts; the next read after max_age retries. Logged once a minute.
        now = time.monotonic()
        if now - self._failed_at >= 60.0:
            self._failed_at = now
            log.warning("metrics: reading the queue counts failed: %s: %s", type(exc).__name__, exc)

    def _node_started(self, event: str, data: dict[str, Any]) -> None:
        self._loop = asyncio.get_running_loop()
        self._refresh_soon()

    def _node_stopped(self, event: str, data: dict[str, Any]) -> None:
        self._loop = None
        if self._task is not None:
            self._task.cancel()
            self._task = None

    def _refresh_soon(self) -> None:
        if self._task is None and self._loop is not None:
            self._task = self._loop.create_task(self._refresh(), name="conveyor-metrics-queue-counts")

    async def _refresh(self) -> None:
        app = self._app()
        try:
            if app is not None:
                self.counts = await app.queue_counts()
        except Exception as exc:
            self._failed(exc)
        finally:
            self._read_at = time.monotonic()
            self._task = None
