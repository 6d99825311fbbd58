"""Notifications on MySQL/MariaDB: a table written in the sender's transaction, polled; handed
over at once inside the sending process.

MySQL has no LISTEN/NOTIFY. ``notify`` (and every operation that notifies) inserts a row into
``conveyor_notifications`` in its own transaction, so a rollback sends nothing. Each listener reads
the rows written after the last one it saw, every ``POLL_INTERVAL`` seconds (one indexed range read
on the primary key: nothing when nothing was sent), and hands those of its channels to its handler
in id order; a row that commits after rows with higher ids is still delivered (``_read``). Rows
older than ``KEEP`` seconds are deleted now and then by the listeners.

The listeners of the process that sent a notification get it when its transaction commits, from
the engine's hub (``fanout``), and skip its row when their poll reads it.

As on the other engines the handler first gets ``("listener", {"event": "connected"})``, and again
after the server was unreachable, so the node looks again for what it may have missed. Polling the
jobs stays the correctness guarantee.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from conveyor.engine import _payloads as payloads
from conveyor.engine.base import NotificationHandler
from conveyor.engine.mysql.core import MysqlCore
from conveyor.engine.mysql.rows import utc_clock

log = logging.getLogger("conveyor.listener")

#: Seconds between two reads of the notifications table.
POLL_INTERVAL = 0.05
#: Seconds a notification row is kept; and between two deletions of older ones.
KEEP = 60.0
RECONNECT_DELAYS = (0.1, 0.5, 1.0, 2.0, 5.0)
#: Seconds an id skipped over (its row not committed yet, or rolled back) is awaited.
GAP_WAIT = 10.0
#: The most skipped ids awaited at once (a burst of rollbacks cannot grow it without bound).
MAX_GAPS = 10_000
CONNECTED: dict[str, Any] = {"event": "connected"}


class MysqlListener:
    """Delivers notifications on some channels to a handler, on the loop that started it."""

    def __init__(self, core: MysqlCore, names: Iterable[str], handler: NotificationHandler) -> None:
        self._core = core
        self.names = frozenset(names)
        self._handler = handler
        self._task: asyncio.Task[None] | None = None
        self._last = 0
        #: Ids skipped over, awaited until a monotonic time (see ``_read``).
        self._gaps: dict[int, float] = {}
        #: Ids of rows the hub delivers (or will once they commit): not handed over by the poll.
        self._delivered: set[int] = set()
        self._delivered_lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped = False

    async def start(self) -> None:
        async with self._core.reading() as cursor:
            await cursor.execute(self._core.files["notifications_head"])
            (row,) = await cursor.fetchall()
        self._last = int(row[0])
        self._loop = asyncio.get_running_loop()
        self._core.hub.add(self)
        self._dispatch("listener", CONNECTED)
        self._task = asyncio.create_task(self._run(), name="conveyor-mysql-listener")

    async def stop(self) -> None:
        self._stopped = True
        self._core.hub.remove(self)
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # -- the hub's side (fanout.Receiver), from any thread --------------------------------------
    def expect(self, row_id: int, channel: str) -> bool:
        if self._stopped or channel not in self.names:
            return False
        with self._delivered_lock:
            self._delivered.add(row_id)
        return True

    def forget(self, row_id: int) -> None:
        with self._delivered_lock:
            self._delivered.discard(row_id)

    def deliver(self, channel: str, payload: dict[str, Any]) -> None:
        if self._stopped or self._loop is None:
            return
        try:
            self._loop.call_soon_threadsafe(self._dispatch, channel, payload)
        except RuntimeError:  # the loop is closed: nobody is listening any more
            self._stopped = True
            self._core.hub.remove(self)

    def _taken(self, row_id: int) -> bool:
        """Whether the hub delivers row ``row_id`` (it is then skipped, once)."""
        with self._delivered_lock:
            if row_id not in self._delivered:
                return False
            self._delivered.discard(row_id)
            return True

    def _settle_delivered(self) -> None:
        """Forget the ids no read will come to again: passed, and not awaited as a gap."""
        with self._delivered_lock:
            if self._delivered:
                self._delivered = {i for i in self._delivered if i > self._last or i in self._gaps}

    def _dispatch(self, channel: str, payload: dict[str, Any]) -> None:
        if self._stopped:
            return
        try:
            self._handler(channel, payload)
        except Exception:
            log.exception("notification handler failed on %r", channel)

    async def _run(self) -> None:
        failures = 0
        pruned = time.monotonic()
        while not self._stopped:
            try:
                await self._read()
                if time.monotonic() - pruned > KEEP:
                    pruned = time.monotonic()
                    await self._prune()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                delay = RECONNECT_DELAYS[min(failures, len(RECONNECT_DELAYS) - 1)]
                failures += 1
                log.warning("notifications unreadable (%s); again in %.1f s", exc, delay)
                await asyncio.sleep(delay)
                continue
            if failures:
                failures = 0
                self._dispatch("listener", CONNECTED)
            await asyncio.sleep(POLL_INTERVAL)

    async def _read(self) -> None:
        """Hand over the rows not seen yet. Ids are taken when a row is inserted, not when it
        commits: a row may show up after rows with higher ids (its transaction committed later).
        An id skipped over is awaited for ``GAP_WAIT`` seconds (read again from the lowest one
        awaited); after that it is taken for a rollback's, which never comes."""
        now = time.monotonic()
        self._gaps = {gap: until for gap, until in self._gaps.items() if until > now}
        start = min(self._gaps) - 1 if self._gaps else self._last
        while True:
            async with self._core.reading() as cursor:
                await cursor.execute(self._core.files["notifications_since"], (start,))
                rows = await cursor.fetchall()
            for row_id, channel, text in rows:
                row_id = int(row_id)
                if row_id <= self._last:
                    if self._gaps.pop(row_id, None) is None:
                        continue  # seen already
                else:
                    if row_id > self._last + 1 and len(self._gaps) < MAX_GAPS:
                        skipped = range(self._last + 1, min(row_id, self._last + 1 + MAX_GAPS))
                        self._gaps.update(dict.fromkeys(skipped, now + GAP_WAIT))
                    self._last = row_id
                if channel in self.names and not self._taken(row_id):
                    payload = payloads.decode(text)
                    if payload is not None:
                        self._dispatch(channel, payload)
            if len(rows) < 1000:
                self._settle_delivered()
                return
            start = int(rows[-1][0])

    async def _prune(self) -> None:
        cutoff = utc_clock(None) - timedelta(seconds=KEEP)
        async with self._core.reading() as cursor:
            await cursor.execute(self._core.files["notifications_prune"], (cutoff,))
