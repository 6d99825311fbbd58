"""Copying the write-ahead log into the database file, off the writer's path."""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from conveyor.errors import ConveyorError

log = logging.getLogger("conveyor.sqlite")

#: At most one checkpoint per this many seconds; writes in between are copied by the next one.
CHECKPOINT_INTERVAL = 0.1


class Checkpointer:
    """Runs PASSIVE checkpoints on a thread and connection of its own.

    SQLite's automatic checkpoint runs inside the COMMIT of whichever write takes the log past 1,000
    pages: the writer itself copies the pages into the database file and syncs it, which was 18 % of
    a 100,000-job insert. So the writer's connection has it off (``wal_autocheckpoint = 0``) and
    calls ``written()`` after each commit, which starts a checkpoint here (at most one per
    ``CHECKPOINT_INTERVAL``) while the writer goes on. A PASSIVE checkpoint never waits for readers
    or writers: what it cannot copy yet, the next one copies.
    """

    def __init__(self, connect: Callable[[], sqlite3.Connection]) -> None:
        self._connect = connect
        self._conn: sqlite3.Connection | None = None
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="conveyor-sqlite-checkpoint")
        self._pending = False
        self._last = 0.0
        #: Checkpoints run so far (for tests and curious operators).
        self.runs = 0

    def written(self) -> None:
        """A write was committed: make sure a checkpoint follows (called on the writer thread)."""
        if not self._pending:
            self._pending = True
            self._thread.submit(self._run)

    def _run(self) -> None:
        wait = self._last + CHECKPOINT_INTERVAL - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        self._pending = False  # from here on, a new write asks for another checkpoint
        self._last = time.monotonic()
        try:
            if self._conn is None:
                self._conn = self._connect()
            self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            self.runs += 1
        except (sqlite3.Error, ConveyorError) as exc:  # busy, or the file is gone: the next write retries
            log.debug("checkpoint of the SQLite log failed: %s", exc)

    def close(self) -> None:
        """Close the connection once a pending checkpoint has run (does not block)."""
        self._thread.submit(self._close)
        self._thread.shutdown(wait=False)

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
