"""One SQLite database as this process uses it: a writer thread, a reader thread, the listeners.

Every ``SqliteEngine`` of a process that opens the same file shares one ``Database`` (the app's
engine and the engine of its blocking twins, say), so the process has exactly one writer connection
per file and its own statements never wait on each other through file locks.

* **Writer**: one connection, used by one thread at a time (``write_lock``): the writer thread, or
  for a one-job insert the caller's own thread (``write_now`` from an event loop when the lock and
  the file are free at once, ``write_blocking`` from a plain thread), which saves two thread
  switches a call. Each write is a function run inside a ``BEGIN IMMEDIATE`` transaction: the
  file's write lock is taken first, so a claim can never race another process's claim, and
  nothing upgrades a stale read snapshot. When another process holds the lock (SQLITE_BUSY,
  "database is locked") the transaction is tried again after a short, growing, jittered pause,
  until ``busy_timeout`` seconds have passed; only then is the error raised.
* **Reader**: one thread with one connection for reads (``get_job``, ``list_jobs``, schema
  checks). In WAL mode readers never block the writer nor wait for it.
* **Checkpoints**: the writer does not copy the log into the database file itself; a thread of
  its own does, after commits (``checkpointer.Checkpointer``).
* **Notifications**: after each commit, the notifications the transaction wrote are handed to
  this process's listeners at once (``listener.Hub``); other processes read them from
  ``conveyor_notifications`` (see ``listener.Watcher``).

``:memory:`` databases have a single connection (the writer, which also reads): every engine of the
process that opens ``:memory:`` shares that one database while any of them is open.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, TypeVar

import orjson

from conveyor.engine import _payloads as payloads
from conveyor.engine._sqlfiles import SqlFiles
from conveyor.engine.sqlite.checkpointer import Checkpointer
from conveyor.engine.sqlite.listener import Hub
from conveyor.errors import ConveyorError, EngineClosedError

log = logging.getLogger("conveyor.sqlite")

T = TypeVar("T")

MEMORY = ":memory:"
SQL_PACKAGE = "conveyor.engine.sqlite.sql"
SQL = SqlFiles(SQL_PACKAGE, "public")

#: Seconds a write keeps retrying while another process holds the write lock (default).
DEFAULT_BUSY_TIMEOUT = 30.0
#: The pause after the first busy attempt; it doubles up to ``MAX_BUSY_PAUSE`` (jittered ±50 %).
FIRST_BUSY_PAUSE = 0.0005
MAX_BUSY_PAUSE = 0.01
#: Seconds SQLite itself waits on a lock for statements outside the writer's retry loop (reads).
READ_BUSY_TIMEOUT = 5.0
#: Notification rows older than this many seconds are deleted (listeners read them within ms).
NOTIFICATION_RETENTION = 30.0
#: How often (seconds) a process looks for old notification rows to delete.
PRUNE_INTERVAL = 5.0
#: The clock that ages notification rows (a test moves its own instead of waiting on this one).
prune_clock = time.monotonic
#: Page cache per connection (KiB): inserts of big batches and fetch scans stay in memory.
CACHE_KIB = 65536

BUSY_CODES = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


#: Primary result codes of failures that say nothing about a statement's data (see is_transient).
TRANSIENT_CODES = (
    *BUSY_CODES,
    sqlite3.SQLITE_FULL,
    sqlite3.SQLITE_IOERR,
    sqlite3.SQLITE_CANTOPEN,
    sqlite3.SQLITE_NOMEM,
)


def is_transient(exc: BaseException) -> bool:
    """True when the same statement may succeed later: the file was busy, full, unreadable or the
    engine closed; False when the statement refused its data (malformed JSON and the like)."""
    if isinstance(exc, EngineClosedError) or is_busy(exc):
        return True
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(exc, sqlite3.Error) and code is not None and (code & 0xFF) in TRANSIENT_CODES


def is_busy(exc: BaseException) -> bool:
    """Is ``exc`` SQLITE_BUSY / SQLITE_LOCKED ("database is locked"), i.e. worth trying again?"""
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) in BUSY_CODES
    message = str(exc)
    return "database is locked" in message or "database is busy" in message


def json_merge(current: str | None, extra: str | None) -> str | None:
    """``current || extra`` as PostgreSQL's jsonb does it for objects: top-level keys replaced."""
    if extra is None:
        return current
    if current is None:
        return extra
    patch = orjson.loads(extra)
    try:
        merged = orjson.loads(current)
    except orjson.JSONDecodeError:  # another client's junk: there is no object to merge into
        return extra
    if not isinstance(merged, dict) or not isinstance(patch, dict):
        return extra
    merged.update(patch)
    return orjson.dumps(merged).decode()


def connect(path: str, *, timeout: float, writer: bool) -> sqlite3.Connection:
    """A connection in autocommit mode (we issue BEGIN ourselves), WAL, synchronous=NORMAL."""
    try:
        conn = sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=False)
    except sqlite3.OperationalError as exc:
        raise ConveyorError(f"cannot open the SQLite database {path!r}: {exc}") from exc
    try:
        if path != MEMORY:
            # Switching to WAL (or a last connection closing elsewhere) may hold a lock briefly.
            mode = _retry_busy(
                lambda: conn.execute("PRAGMA journal_mode = WAL").fetchone(), max(timeout, READ_BUSY_TIMEOUT)
            )
            if mode is None or str(mode[0]).lower() != "wal":
                log.warning("SQLite database %s is not in WAL mode (%s)", path, mode)
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute(f"PRAGMA cache_size = -{CACHE_KIB if writer else CACHE_KIB // 4}")
        conn.execute("PRAGMA temp_store = MEMORY")
        if writer and path != MEMORY:
            conn.execute("PRAGMA wal_autocheckpoint = 0")  # the Checkpointer's thread does it
        conn.create_function("conveyor_json_merge", 2, json_merge, deterministic=True)
    except BaseException:
        conn.close()
        raise
    return conn


def _retry_busy(operation: Callable[[], T], timeout: float) -> T:
    deadline = time.monotonic() + timeout
    pause = FIRST_BUSY_PAUSE
    while True:
        try:
            return operation()
        except sqlite3.OperationalError as exc:
            if not is_busy(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(pause * (0.5 + random.random()))
        pause = min(pause * 2, MAX_BUSY_PAUSE)


class NotNow:
    """What ``Database.write_now`` returns when it ran nothing (the writer was busy)."""


NOT_NOW = NotNow()


class WriteTx(Protocol):
    """What a write function sees: the connection of an open write transaction, and ``notify``.
    ``Tx`` is the engine's own; ``foreign.CallerTx`` a caller's connection."""

    conn: sqlite3.Connection

    def notify(
        self, channel: str, payload: dict[str, Any], created: str, *, written: bool = False
    ) -> None: ...


class Tx:
    """A write transaction on the writer connection, as the functions run by ``Database.write`` see
    it: the connection, and ``notify`` (written now, delivered in this process after the commit)."""

    __slots__ = ("_notified", "conn", "db")

    def __init__(self, db: Database, conn: sqlite3.Connection) -> None:
        self.db = db
        self.conn = conn
        self._notified: list[tuple[str, dict[str, Any]]] = []

    def notify(self, channel: str, payload: dict[str, Any], created: str, *, written: bool = False) -> None:
        """Notify ``channel``: other processes read the row once committed; this process's
        listeners get ``payload`` right after the commit. ``written``: the row is written already
        (or cannot be), only deliver it here."""
        if self.db.shared and not written:
            self.conn.execute(SQL["notify"], (channel, payloads.encode(payload), self.db.token, created))
        self._notified.append((channel, payload))


class Database:
    """The connections and threads one process uses for one SQLite file (see the module doc)."""

    def __init__(self, path: str, *, busy_timeout: float = DEFAULT_BUSY_TIMEOUT) -> None:
        self.path = path
        self.memory = path == MEMORY
        #: Other processes can see this database (a file): notifications go through the table.
        self.shared = not self.memory
        self.busy_timeout = busy_timeout
        #: Names this process in ``conveyor_notifications.source``.
        self.token = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self.users = 0
        self._writer = connect(path, timeout=0 if self.shared else READ_BUSY_TIMEOUT, writer=True)
        self._writer_thread = ThreadPoolExecutor(1, thread_name_prefix="conveyor-sqlite-writer")
        #: Held by whichever thread uses the writer connection (see the module's docstring).
        self.write_lock = threading.Lock()
        self._writer_closed = False
        if self.memory:
            self._reader = self._writer
            self._reader_thread = self._writer_thread
        else:
            self._reader = connect(path, timeout=READ_BUSY_TIMEOUT, writer=False)
            self._reader_thread = ThreadPoolExecutor(1, thread_name_prefix="conveyor-sqlite-reader")
        self.hub = Hub(path, self.token, watch=self.shared)
        self._checkpointer = (
            Checkpointer(lambda: connect(path, timeout=READ_BUSY_TIMEOUT, writer=False))
            if self.shared
            else None
        )
        self._pruned_at = prune_clock()
        #: (monotonic time, highest notification id then): rows up to an id older than the
        #: retention period are deleted.
        self._marks: list[tuple[float, int]] = []
        self.closed = False

    def __repr__(self) -> str:
        return f"Database({self.path!r})"

    # -- running statements ------------------------------------------------------------------
    async def write(self, operation: Callable[[Tx], T], *, retry: bool = True) -> T:
        """Run ``operation`` in a write transaction on the writer thread; return its result.

        ``retry``: the operation may be run again from the start when SQLITE_BUSY interrupts it
        (it has no effect outside the transaction). Taking the lock is always retried.
        """
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._writer_thread, self._run_write, operation, retry)

    async def read(self, operation: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``operation`` on the reader connection, on the reader thread."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._reader_thread, operation, self._reader)

    def write_now(self, operation: Callable[[Tx], T]) -> T | NotNow:
        """Run ``operation`` in a write transaction in the calling thread (an event loop's) when
        that costs no wait: the writer connection is free and the file's write lock is taken at
        the first try. Otherwise nothing is run and ``NOT_NOW`` returned (use ``write``): the loop
        never sleeps through another writer's transaction or a busy pause."""
        if self.memory or not self.write_lock.acquire(blocking=False):
            return NOT_NOW  # (``:memory:`` reads share the writer connection on the writer thread)
        try:
            if self.closed:  # no write starts once closing began; the writer thread's finish theirs
                return NOT_NOW
            return self._write_locked(operation, retry=False, wait=False)
        finally:
            self.write_lock.release()

    def write_blocking(self, operation: Callable[[Tx], T], *, retry: bool = True) -> T:
        """``write`` from a plain thread, run in that thread, waiting like the writer thread does
        (for the lock, and for the file up to ``busy_timeout``)."""
        if self.memory:
            return self._writer_thread.submit(self._run_write, operation, retry).result()
        return self._run_write(operation, retry)

    def _run_write(self, operation: Callable[[Tx], T], retry: bool) -> T:
        with self.write_lock:
            if self._writer_closed:
                raise EngineClosedError("the SQLite database is closed")
            result = self._write_locked(operation, retry=retry, wait=True)
            assert not isinstance(result, NotNow)
            return result

    def _write_locked(self, operation: Callable[[Tx], T], *, retry: bool, wait: bool) -> T | NotNow:
        conn = self._writer
        deadline = time.monotonic() + self.busy_timeout
        pause = FIRST_BUSY_PAUSE
        while True:
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                if not is_busy(exc):
                    raise
                if not wait:
                    return NOT_NOW
                if time.monotonic() >= deadline:
                    raise
                time.sleep(pause * (0.5 + random.random()))
                pause = min(pause * 2, MAX_BUSY_PAUSE)
                continue
            tx = Tx(self, conn)
            try:
                result = operation(tx)
                if self.shared:
                    self._maybe_prune(conn)
                conn.execute("COMMIT")
                if self._checkpointer is not None:
                    self._checkpointer.written()
            except BaseException as exc:
                if conn.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                if retry and is_busy(exc) and time.monotonic() < deadline:
                    time.sleep(pause * (0.5 + random.random()))
                    pause = min(pause * 2, MAX_BUSY_PAUSE)
                    continue
                raise
            for channel, payload in tx._notified:
                self.hub.publish(channel, payload)
            return result

    def _maybe_prune(self, conn: sqlite3.Connection) -> None:
        """Now and then, delete notification rows older than the retention period."""
        now = prune_clock()
        if now - self._pruned_at < PRUNE_INTERVAL:
            return
        self._pruned_at = now
        try:
            row = conn.execute(SQL["notifications_head"]).fetchone()
            self._marks.append((now, int(row[0]) if row else 0))
            old = [mark for mark in self._marks if now - mark[0] >= NOTIFICATION_RETENTION]
            if old:
                conn.execute(SQL["notifications_prune"], (old[-1][1],))
                self._marks = [mark for mark in self._marks if now - mark[0] < NOTIFICATION_RETENTION]
        except sqlite3.OperationalError as exc:
            if "no such table" not in str(exc):
                raise

    # -- lifecycle ---------------------------------------------------------------------------
    def close(self) -> None:
        """Close connections and threads once the work queued before has run (does not block)."""
        if self.closed:
            return
        self.closed = True
        self.hub.close()
        if self._checkpointer is not None:
            self._checkpointer.close()
        if not self.memory:
            self._reader_thread.submit(self._reader.close)
            self._reader_thread.shutdown(wait=False)
        self._writer_thread.submit(self._close_writer)
        self._writer_thread.shutdown(wait=False)

    def _close_writer(self) -> None:
        with self.write_lock:  # not under a write a caller's thread is making
            self._writer_closed = True
            self._writer.close()


# -- one Database per file per process --------------------------------------------------------------
_registry_lock = threading.Lock()
_registry: dict[tuple[int, str], Database] = {}


def acquire(path: str, *, busy_timeout: float = DEFAULT_BUSY_TIMEOUT) -> Database:
    """The process's ``Database`` for ``path`` (opened on first use), counted as used once more."""
    key = (os.getpid(), path)
    with _registry_lock:
        db = _registry.get(key)
        if db is None or db.closed:
            db = Database(path, busy_timeout=busy_timeout)
            _registry[key] = db
        db.users += 1
        return db


def release(db: Database) -> None:
    """One user fewer; the last one closes the database."""
    with _registry_lock:
        db.users -= 1
        if db.users > 0:
            return
        key = (os.getpid(), db.path)
        if _registry.get(key) is db:
            del _registry[key]
    db.close()
