"""Inserts from a plain thread on a blocking psycopg pool (the engine role ``BlockingInserts``).

``Conveyor.enqueue_sync`` otherwise runs on the app's portal, an event loop in a thread of its own:
each call is handed to that thread and its result handed back, two thread switches that cost more
than the statement on a loaded machine (the sync enqueue measured 0.58x a bare blocking psycopg
insert; see ``benchmarks/README.md``, ``enqueue-one``). Here the caller's own thread takes a
connection of a blocking pool and runs the very statements ``PostgresEngine.insert`` runs: one for
a plain job (its ``pg_notify`` inside), the same steps otherwise (``Inserter.insert_sync``).

The pool's sessions are set up as the engine's main pool's are (``sessions.configure_session_sync``,
or through a transaction pooler ``pooler.configure``), and a connection the server closed while it
sat idle is never handed out (``pool.is_dead``, as ``LivePool``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from conveyor.engine._step_names import step_names_kept
from conveyor.engine.postgres import pooler as poolers
from conveyor.engine.postgres.inserter import Inserter
from conveyor.engine.postgres.pool import is_dead
from conveyor.engine.postgres.sessions import configure_session_sync, json_loaders
from conveyor.job_ids import JobIds
from conveyor.request import JobRequest

#: Seconds a pooled connection may stay unused before the pool closes it (down to one).
MAX_IDLE = 60.0


class LiveBlockingPool(ConnectionPool):
    """A ``ConnectionPool`` whose ``getconn`` skips connections the server has closed (see
    ``pool.LivePool``, its async twin)."""

    def getconn(self, timeout: float | None = None) -> Any:
        for _ in range(self.max_size):
            conn = super().getconn(timeout)
            if not is_dead(conn):
                return conn
            conn.close()  # closed, it is discarded by putconn and a new one is made
            self.putconn(conn)
        return super().getconn(timeout)


class PostgresBlockingInsert:
    """Blocking inserts of one open ``PostgresEngine``, in the calling thread (any thread).
    ``pooled``: whether the engine now treats its connections as a transaction pooler's."""

    def __init__(
        self, dsn: str, *, name: str, max_size: int, inserter: Inserter, pooled: Callable[[], bool]
    ) -> None:
        self._inserter = inserter
        self._pooled = pooled
        self._pool = LiveBlockingPool(
            dsn,
            min_size=1,
            max_size=max_size,
            max_idle=MAX_IDLE,
            kwargs={"autocommit": True},
            configure=self._configure,
            open=False,
            name=name,
        )
        # The engine has reached the server already (its probe): connect in the background.
        self._pool.open(wait=False)

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        if self._pooled():
            json_loaders(conn)
            poolers.configure(conn)
        else:
            configure_session_sync(conn)

    def insert(self, requests: Iterable[JobRequest], *, now: datetime | None = None) -> JobIds:
        # getconn and putconn, not ``pool.connection()``: its generator and the connection's own
        # ``with`` (a commit, of nothing in autocommit) are a tenth of a single insert's CPU. putconn
        # rolls back a connection an error left inside a transaction, and discards a broken one.
        conn = self._pool.getconn()
        try:
            if conn.prepare_threshold is not None and self._pooled():
                conn.prepare_threshold = None  # a pooler found since this session was set up
            with step_names_kept():
                return self._inserter.insert_sync(conn, requests, now, own=True)
        finally:
            self._pool.putconn(conn)

    def close(self) -> None:
        self._pool.close()
