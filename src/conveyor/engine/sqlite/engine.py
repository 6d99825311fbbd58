"""``SqliteEngine``: the embedded engine, one SQLite file shared by the processes of one machine.

Semantics follow ``PostgresEngine`` statement for statement (the ``.sql`` files beside each engine
say the same things in two dialects). What differs, and why:

* Driver: the standard ``sqlite3`` module on dedicated threads (``database.Database``): one writer
  connection per file per process, running each operation as one ``BEGIN IMMEDIATE`` transaction,
  plus one reader connection. SQLite has one writer at a time, so claims never overlap across
  processes; busy locks are retried, never surfaced (up to ``busy_timeout`` seconds).
* ``now=None`` means this machine's clock, read when the statement runs; SQLite has no server.
* ``prefix``: SQLite has no schemas, so only the default ``"public"`` is accepted; put separate
  installations in separate files.
* Notifications: in-process fan-out plus a table polled through ``PRAGMA data_version`` across
  processes (``listener``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any

import orjson

from conveyor._options import check_queues
from conveyor.engine._step_names import step_names_kept
from conveyor.engine.base import NotificationHandler
from conveyor.engine.sqlite import foreign, inserter
from conveyor.engine.sqlite.cluster import SqliteCluster
from conveyor.engine.sqlite.core import FILES
from conveyor.engine.sqlite.database import NotNow, Tx, is_transient
from conveyor.engine.sqlite.hot_path import SqliteHotPath
from conveyor.engine.sqlite.jobs import SqliteJobs
from conveyor.engine.sqlite.listener import SqliteListener
from conveyor.engine.sqlite.relay import SqliteRelay
from conveyor.engine.sqlite.rows import InsertRows, check_now, time_text, utc_clock
from conveyor.engine.sqlite.stats import SqliteStats
from conveyor.engine.sqlite.stored_queues import SqliteStoredQueues
from conveyor.engine.sqlite.workflow_records import SqliteWorkflowRecords
from conveyor.errors import one_line
from conveyor.fleet import QueuePoll, QueueState, with_limits
from conveyor.job_ids import JobIds
from conveyor.request import JobRequest


class SqliteEngine(
    SqliteJobs,
    SqliteWorkflowRecords,
    SqliteHotPath,
    SqliteCluster,
    SqliteRelay,
    SqliteStats,
    SqliteStoredQueues,
):
    """Runs every Conveyor statement on one SQLite database file (or ``:memory:``)."""

    name = "sqlite"

    def __repr__(self) -> str:
        return f"SqliteEngine({self.path!r})"

    # -- inserting ---------------------------------------------------------------------------
    async def insert(
        self,
        requests: Iterable[JobRequest],
        *,
        conn: Any = None,
        now: datetime | None = None,
        hold: Sequence[int] = (),
    ) -> JobIds:
        check_now(now)
        if conn is not None:
            driver = await foreign.async_driver_connection(conn)
            first, rest = inserter.split(requests)
            if not first:
                return JobIds()
            builder = InsertRows(utc_clock(now))
            steps = inserter.holding(
                inserter.insert_steps(inserter.chunk_requests(first, rest), builder, None), hold
            )
            with step_names_kept():
                async with foreign.atomic_async(driver):
                    inserted = await inserter.run_async(driver, steps)
            return inserted.ids
        first, rest = inserter.split(requests)
        if not first:
            return JobIds()
        run = self._insert_tx(first, rest, now, hold)
        with step_names_kept():
            if len(first) == 1 and not hold:
                # One job (the call a web request makes) is written in this thread when the writer
                # is free at once: a hop to the writer thread and back cost more than the insert.
                done = self.database.write_now(run)
                if not isinstance(done, NotNow):
                    return done
            # Not retried as a whole: it consumes the caller's iterable (taking the lock is retried).
            return await self.database.write(run, retry=False)

    def _insert_tx(
        self, first: list[JobRequest], rest: Iterator[Any], now: datetime | None, hold: Sequence[int]
    ) -> Callable[[Tx], JobIds]:
        """The write transaction of one insert on the engine's writer connection."""

        def run(tx: Tx) -> JobIds:
            return _insert_in(tx, first, rest, now, hold)

        return run

    def blocking_inserts(self) -> SqliteBlockingInsert:
        return SqliteBlockingInsert(self)

    async def insert_locked_workflow(
        self,
        requests: Sequence[JobRequest],
        *,
        workflow_id: str,
        name: str | None,
        lock: str,
        now: datetime | None = None,
        hold: Sequence[int] = (),
    ) -> JobIds | str:
        steps = list(requests)

        # One write transaction (one writer at a time, across processes): let go of the lock for
        # finished holders, read the holder, or take the lock and insert.
        def run(tx: Tx) -> JobIds | str:
            tx.conn.execute(FILES["workflow_lock_release"], {"lock": lock})
            holder = tx.conn.execute(FILES["workflow_lock_holder"], {"lock": lock}).fetchone()
            if holder is not None:
                return str(holder[0])
            claim = {"id": workflow_id, "name": name, "lock": lock, "now": time_text(utc_clock(now))}
            tx.conn.execute(FILES["workflow_lock_claim"], claim)
            return _insert_in(tx, steps, iter(()), now, hold)

        with step_names_kept():
            return await self.database.write(run)

    def insert_sync(
        self,
        requests: Iterable[JobRequest],
        *,
        conn: Any,
        now: datetime | None = None,
        hold: Sequence[int] = (),
    ) -> JobIds:
        check_now(now)
        driver = foreign.sync_driver_connection(conn)
        first, rest = inserter.split(requests)
        if not first:
            return JobIds()
        builder = InsertRows(utc_clock(now))
        with step_names_kept(), foreign.atomic_sync(driver):
            inserted = inserter.write_sync(driver, first, rest, builder, None, hold=hold)
        return inserted.ids

    # -- polling -----------------------------------------------------------------------------
    async def waiting_queues(self, queues: Sequence[str]) -> set[str]:
        names = check_queues(queues)
        if not names:
            return set()
        params = {"queues": orjson.dumps(names).decode()}
        statement = FILES["waiting_queues"]
        rows = await self.database.read(lambda conn: conn.execute(statement, params).fetchall())
        return {row[0] for row in rows}

    async def poll_queues(self, name: str, queues: Sequence[str], *, awake: Sequence[str]) -> QueuePoll:
        names, awake_names = check_queues(queues), check_queues(awake)
        if not names and not awake_names:
            return QueuePoll(frozenset(), {})
        params = {
            "name": name,
            "queues": orjson.dumps(names).decode(),
            "awake": orjson.dumps(awake_names).decode(),
        }
        statement = FILES["poll_queues"]
        rows = await self.database.read(lambda conn: conn.execute(statement, params).fetchall())
        states = {
            row[1]: QueueState(paused=None if row[2] is None else bool(row[2]), limit=row[3])
            for row in rows
            if row[0] == "state"
        }
        states = with_limits(states, [(row[1], row[4]) for row in rows if row[0] == "limits"])
        return QueuePoll(frozenset(row[1] for row in rows if row[0] == "waiting"), states)

    # -- notifications -----------------------------------------------------------------------
    async def notify(self, name: str, payload: dict[str, Any]) -> None:
        def run(tx: Tx) -> None:
            try:
                tx.notify(name, payload, time_text(utc_clock(None)))
            except sqlite3.OperationalError as exc:
                # Not installed (yet): this process's listeners still hear it.
                if "no such table" not in str(exc):
                    raise
                tx.notify(name, payload, "", written=True)

        await self.database.write(run)

    async def listen(self, names: Iterable[str], handler: NotificationHandler) -> SqliteListener:
        listener = SqliteListener(self.database.hub, names, handler)
        await listener.start()
        return listener

    def is_transient(self, exc: BaseException) -> bool:
        return is_transient(exc)

    def explain(self, exc: BaseException) -> str | None:
        return f"SQLite error: {one_line(str(exc))}" if isinstance(exc, sqlite3.Error) else None


class SqliteBlockingInsert:
    """Inserts from a plain thread, in that thread, on the engine's writer connection (the role
    ``BlockingInserts``): the same transaction as ``SqliteEngine.insert``, under the same lock."""

    def __init__(self, engine: SqliteEngine) -> None:
        self._engine = engine

    def insert(self, requests: Iterable[JobRequest], *, now: datetime | None = None) -> JobIds:
        check_now(now)
        first, rest = inserter.split(requests)
        if not first:
            return JobIds()
        run = self._engine._insert_tx(first, rest, now, ())
        with step_names_kept():
            return self._engine.database.write_blocking(run, retry=False)

    def close(self) -> None:
        """Nothing of its own to release: the engine holds the database."""


def _insert_in(
    tx: Tx, first: list[JobRequest], rest: Any, now: datetime | None, hold: Sequence[int]
) -> JobIds:
    """Insert the requests (``first``, then the iterator ``rest``) in the write transaction ``tx``."""
    builder = InsertRows(utc_clock(now))
    done = inserter.write_sync(tx.conn, first, rest, builder, tx.db.token, notify=tx.db.shared, hold=hold)
    for queue in done.queues:
        tx.notify("insert", {"queue": queue}, builder.clock_text, written=True)
    return done.ids
