"""``MysqlEngine``: the MySQL/MariaDB engine, one database of a server shared by every node.

Semantics follow ``PostgresEngine`` statement for statement, every role implemented. What differs,
and why:

* Driver: asyncmy (measured against aiomysql: ``benchmarks/mysql_drivers.py``), one pool per engine.
* ``prefix``: the database Conveyor's tables live in, when it is not the URL's.
* ``now=None`` means this machine's clock (read in Python, as on SQLite): the server's would cost a
  round trip before each statement that needs the time in Python.
* Notifications: no LISTEN/NOTIFY; a table written in the sender's transaction and polled
  (``listener.py``), and handed to the sending process's own listeners at commit (``fanout.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import orjson

from conveyor._options import check_queues
from conveyor.engine._step_names import step_names_kept
from conveyor.engine.base import NotificationHandler
from conveyor.engine.mysql import fanout, inserter
from conveyor.engine.mysql.blocking import MysqlBlockingInsert
from conveyor.engine.mysql.caller import joined, run_blocking
from conveyor.engine.mysql.cluster import MysqlCluster
from conveyor.engine.mysql.connect import DEADLOCK, rerun_victims
from conveyor.engine.mysql.cron import MysqlCron
from conveyor.engine.mysql.hot_path import MysqlHotPath
from conveyor.engine.mysql.jobs import MysqlJobs
from conveyor.engine.mysql.listener import MysqlListener
from conveyor.engine.mysql.producers import MysqlProducers
from conveyor.engine.mysql.pruning import MysqlPruning
from conveyor.engine.mysql.relay import MysqlRelay
from conveyor.engine.mysql.rows import InsertRows, check_now, utc_clock
from conveyor.engine.mysql.stats import MysqlStats
from conveyor.engine.mysql.workflow_records import MysqlWorkflowRecords
from conveyor.fleet import QueuePoll, QueueState, with_limits
from conveyor.job_ids import JobIds
from conveyor.request import JobRequest

#: Deadlock victim, and a unique key taken between the lookup and the insert: the insert is
#: run again (when its requests are all in hand), up to ``connect.VICTIM_TRIES`` times in all.
RETRIED = frozenset({DEADLOCK, 1062})


class MysqlEngine(
    MysqlJobs,
    MysqlHotPath,
    MysqlProducers,
    MysqlStats,
    MysqlWorkflowRecords,
    MysqlRelay,
    MysqlCluster,
    MysqlPruning,
    MysqlCron,
):
    """Runs every Conveyor statement on one MySQL or MariaDB database."""

    _rows_per_statement = inserter.ROWS_PER_STATEMENT

    async def open(self) -> None:
        await super().open()
        async with self.reading() as cursor:
            await cursor.execute(self.files["autoinc_mode"])
            (row,) = await cursor.fetchall()
        # Mode 2 may interleave the ids of concurrent multi-row inserts: one row a statement.
        self._rows_per_statement = inserter.ROWS_PER_STATEMENT if int(row[0]) < 2 else 1

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
            return await self._insert_on(joined(conn), requests, now, hold)
        return await self._insert_own(self.transaction, requests, now, hold)

    async def _insert_own(
        self, transaction: Any, requests: Iterable[JobRequest], now: datetime | None, hold: Sequence[int]
    ) -> JobIds:
        """Insert in transactions of the engine's own, ``transaction(keyed=...)``: the async pool's,
        or the blocking inserts' (``blocking.py``), which run this very code in the caller's thread."""
        first, rest = inserter.split(requests)
        if not first:
            return JobIds()
        whole = len(first) < inserter.INSERT_CHUNK  # all in hand: safe to run again
        keyed = any(request.unique is not None for request in first)

        async def insert() -> JobIds:
            builder = InsertRows(utc_clock(now))
            async with transaction(keyed=keyed) as cursor:
                done = await inserter.insert(
                    cursor,
                    self.files,
                    inserter.chunks(first, rest),
                    builder,
                    rows_per_statement=self._rows_per_statement,
                    hold=hold,
                )
            return done.ids

        with step_names_kept():
            return await rerun_victims(insert, codes=RETRIED, once=not whole)

    def blocking_inserts(self) -> MysqlBlockingInsert:
        """Inserts in the caller's thread on PyMySQL connections of their own (``blocking.py``)."""
        return MysqlBlockingInsert(
            self._insert_own,
            address=self.address,
            size=self.max_connections,
            hub=self.hub,
            is_open=lambda: self._pool is not None,
        )

    def insert_sync(
        self,
        requests: Iterable[JobRequest],
        *,
        conn: Any,
        now: datetime | None = None,
        hold: Sequence[int] = (),
    ) -> JobIds:
        check_now(now)
        return run_blocking(self._insert_on(joined(conn, blocking=True), requests, now, hold))

    async def _insert_on(
        self, within: Any, requests: Iterable[JobRequest], now: datetime | None, hold: Sequence[int]
    ) -> JobIds:
        """Insert in the caller's transaction (``caller.joined``): once, since only the caller can
        run its transaction again. Unique keys' named locks are released when the insert is done,
        those it took only; the UNIQUE index holds a twin inserted meanwhile until the caller's
        transaction ends."""
        first, rest = inserter.split(requests)
        if not first:
            return JobIds()
        taken: list[str] = []
        with step_names_kept():
            async with within as cursor:
                try:
                    done = await inserter.insert(
                        cursor,
                        self.files,
                        inserter.chunks(first, rest),
                        InsertRows(utc_clock(now)),
                        rows_per_statement=self._rows_per_statement,
                        hold=hold,
                        taken=taken,
                    )
                finally:
                    await inserter.unlock_keys(cursor, self.files, taken)
        return done.ids

    # -- polling -----------------------------------------------------------------------------
    async def waiting_queues(self, queues: Sequence[str]) -> set[str]:
        names = check_queues(queues)
        if not names:
            return set()
        async with self.reading() as cursor:
            await cursor.execute(self.files["waiting_queues"], {"queues": orjson.dumps(names).decode()})
            return {row[0] for row in await cursor.fetchall()}

    async def poll_queues(self, name: str, queues: Sequence[str], *, awake: Sequence[str]) -> QueuePoll:
        names, awake_names = check_queues(queues), check_queues(awake)
        if not names and not awake_names:
            return QueuePoll(frozenset(), {})
        params = {
            "name": name,
            "queues": orjson.dumps(names).decode(),
            "awake": orjson.dumps(awake_names).decode(),
        }
        async with self.reading() as cursor:
            await cursor.execute(self.files["poll_queues"], params)
            rows = await cursor.fetchall()
        states = {
            row[1]: QueueState(paused=None if row[2] is None else bool(row[2]), limit=row[3])
            for row in rows
            if row[0] == "state"
        }
        states = with_limits(states, [(row[1], row[4]) for row in rows if row[0] == "limits"])
        return QueuePoll(frozenset(row[1] for row in rows if row[0] == "waiting"), states)

    # -- notifications -----------------------------------------------------------------------
    async def notify(self, name: str, payload: dict[str, Any]) -> None:
        async with self.transaction() as cursor:
            await fanout.notify(cursor, self.files, name, payload)

    async def listen(self, names: Iterable[str], handler: NotificationHandler) -> MysqlListener:
        listener = MysqlListener(self, names, handler)
        await listener.start()
        return listener
