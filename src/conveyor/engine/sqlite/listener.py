"""Notifications on SQLite: immediate inside a process, a few milliseconds across processes.

SQLite has no LISTEN/NOTIFY, so notifications travel two ways:

* **Inside the process**, each ``Database`` has a ``Hub``: when a write transaction that notified
  commits, the hub hands the payloads to every listener of the process at once, on each listener's
  event loop (``call_soon_threadsafe``). No polling.
* **Across processes**, ``notify`` also inserts a row into ``conveyor_notifications`` in the same
  transaction (so a rollback sends nothing). One ``Watcher`` thread per process and file, running
  while the process has listeners, asks ``PRAGMA data_version`` on its own connection every
  ``WATCH_INTERVAL`` seconds; the value changes whenever another connection commits, and only then
  does it read the rows that appeared since. Rows this process wrote itself (``source`` = its token)
  were delivered by the hub already and are skipped; rows written through a caller's connection
  (``source`` NULL, delivered by nobody yet) reach this process's listeners this way too.

As on PostgreSQL, the handler gets the logical channel name ("insert", "signal", ...) and the decoded
payload, and ("listener", {"event": "connected"}) when it starts and after the watcher reconnects,
so the node looks again for what it may have missed. Polling stays the correctness guarantee.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
from collections.abc import Iterable
from concurrent.futures import Future
from typing import Any

from conveyor.engine import _payloads as payloads
from conveyor.engine._sqlfiles import SqlFiles
from conveyor.engine.base import NotificationHandler

log = logging.getLogger("conveyor.listener")

SQL = SqlFiles("conveyor.engine.sqlite.sql", "public")

#: Seconds between two looks at ``PRAGMA data_version``.
WATCH_INTERVAL = 0.01
RECONNECT_DELAYS = (0.1, 0.5, 1.0, 2.0, 5.0)
CONNECTED: dict[str, Any] = {"event": "connected"}


class SqliteListener:
    """Delivers notifications on some channels to a handler, on the loop that started it."""

    def __init__(self, hub: Hub, names: Iterable[str], handler: NotificationHandler) -> None:
        self._hub = hub
        self.names = frozenset(names)
        self._handler = handler
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped = False

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        ready = self._hub.add(self)
        if ready is not None:
            # The watcher has read where the table stands: nothing sent from now on is missed.
            await asyncio.wrap_future(ready)
        self._dispatch("listener", CONNECTED)

    async def stop(self) -> None:
        if not self._stopped:
            self._stopped = True
            self._hub.remove(self)

    def deliver(self, channel: str, payload: dict[str, Any]) -> None:
        """Hand a notification over from any thread; the handler runs on the listener's loop."""
        if self._stopped or self._loop is None or (channel not in self.names and channel != "listener"):
            return
        try:
            self._loop.call_soon_threadsafe(self._dispatch, channel, payload)
        except RuntimeError:  # the loop is closed: nobody is listening any more
            self._stopped = True

    def _dispatch(self, channel: str, payload: dict[str, Any]) -> None:
        if self._stopped:
            return
        try:
            self._handler(channel, payload)
        except Exception:
            log.exception("notification handler failed for %s %r", channel, payload)


class Hub:
    """The listeners of one process on one database, and (for files) the watcher feeding them."""

    def __init__(self, path: str, token: str, *, watch: bool) -> None:
        self.path = path
        self.token = token
        self._watch = watch
        self._lock = threading.Lock()
        self._listeners: tuple[SqliteListener, ...] = ()
        self._watcher: Watcher | None = None

    def add(self, listener: SqliteListener) -> Future[None] | None:
        """Register ``listener``; the future (if any) completes once the watcher is in place."""
        with self._lock:
            self._listeners = (*self._listeners, listener)
            if not self._watch:
                return None
            if self._watcher is None or not self._watcher.is_alive():
                self._watcher = Watcher(self)
                self._watcher.start()
            return self._watcher.ready

    def remove(self, listener: SqliteListener) -> None:
        with self._lock:
            self._listeners = tuple(one for one in self._listeners if one is not listener)
            watcher = self._watcher if not self._listeners else None
            if watcher is not None:
                self._watcher = None
        if watcher is not None:
            watcher.stop()

    def publish(self, channel: str, payload: dict[str, Any]) -> None:
        """Deliver to every listener of this process (from any thread)."""
        for listener in self._listeners:
            listener.deliver(channel, payload)

    def close(self) -> None:
        with self._lock:
            watcher, self._watcher = self._watcher, None
            self._listeners = ()
        if watcher is not None:
            watcher.stop()


class Watcher(threading.Thread):
    """Reads notifications other processes (and callers' transactions) committed; see the module doc."""

    def __init__(self, hub: Hub) -> None:
        super().__init__(name="conveyor-sqlite-watcher", daemon=True)
        self.hub = hub
        self.ready: Future[None] = Future()
        self._stop_event = threading.Event()
        self._since = 0
        self._version: int | None = None

    def stop(self) -> None:
        self._stop_event.set()

    def run(self) -> None:
        failures = 0
        connected_once = False
        while not self._stop_event.is_set():
            try:
                conn = sqlite3.connect(self.hub.path, timeout=1.0, isolation_level=None)
            except sqlite3.Error as exc:
                if not connected_once and not self.ready.done():
                    self.ready.set_exception(exc)
                    return
                failures += 1
                self._pause(failures, exc)
                continue
            try:
                self._version = self._data_version(conn)
                if not connected_once:
                    self._since = self._head(conn)
                    connected_once = True
                    self.ready.set_result(None)
                else:
                    # Anything sent while we were away may be lost: tell the listeners to look again.
                    self.hub.publish("listener", CONNECTED)
                failures = 0
                while not self._stop_event.wait(WATCH_INTERVAL):
                    self._poll(conn)
            except sqlite3.Error as exc:
                if not self.ready.done():
                    self.ready.set_exception(exc)
                    return
                failures += 1
                self._pause(failures, exc)
            finally:
                conn.close()

    def _pause(self, failures: int, exc: BaseException) -> None:
        delay = RECONNECT_DELAYS[min(failures - 1, len(RECONNECT_DELAYS) - 1)]
        log.warning("SQLite notification watcher failed (%s); reconnecting in %.1fs", exc, delay)
        self._stop_event.wait(delay)

    @staticmethod
    def _data_version(conn: sqlite3.Connection) -> int:
        row = conn.execute("PRAGMA data_version").fetchone()
        return int(row[0])

    @staticmethod
    def _head(conn: sqlite3.Connection) -> int:
        try:
            row = conn.execute(SQL["notifications_head"]).fetchone()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return 0
            raise
        return int(row[0]) if row else 0

    def _poll(self, conn: sqlite3.Connection) -> None:
        version = self._data_version(conn)
        if version == self._version:
            return
        self._version = version
        try:
            rows = conn.execute(SQL["notifications_since"], (self._since,)).fetchall()
            if not rows and self._head(conn) < self._since:
                # The table was dropped and created again (uninstall, install): ids start over.
                self._since = 0
                rows = conn.execute(SQL["notifications_since"], (self._since,)).fetchall()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return
            raise
        token = self.hub.token
        for note_id, channel, text, source in rows:
            self._since = note_id
            if source == token:
                continue
            payload = payloads.decode(text)
            if payload is None:
                log.debug("ignoring notification on %s: %r", channel, text[:200])
                continue
            self.hub.publish(channel, payload)
