"""``PostgresEngine``: the engine for a fleet of nodes sharing one PostgreSQL database."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from conveyor._options import check_queues
from conveyor.engine import _payloads as payloads
from conveyor.engine._step_names import step_names_kept
from conveyor.engine.base import NotificationHandler
from conveyor.engine.postgres import faults, foreign, pooler
from conveyor.engine.postgres.blocking import PostgresBlockingInsert
from conveyor.engine.postgres.cluster import PostgresCluster
from conveyor.engine.postgres.core import channel, log
from conveyor.engine.postgres.hot_path import PostgresHotPath
from conveyor.engine.postgres.jobs import PostgresJobs
from conveyor.engine.postgres.listener import PostgresListener
from conveyor.engine.postgres.relay import PostgresRelay
from conveyor.engine.postgres.rows import naive_utc
from conveyor.engine.postgres.stats import PostgresStats
from conveyor.engine.postgres.stored_queues import PostgresStoredQueues
from conveyor.engine.postgres.workflow_records import PostgresWorkflowRecords
from conveyor.fleet import QueuePoll, QueueState, with_limits
from conveyor.job_ids import JobIds
from conveyor.request import JobRequest


class PostgresEngine(
    PostgresJobs,
    PostgresWorkflowRecords,
    PostgresHotPath,
    PostgresCluster,
    PostgresRelay,
    PostgresStats,
    PostgresStoredQueues,
):
    """Runs every Conveyor statement on PostgreSQL through an async psycopg pool.

    Fetching and acking, the statements a busy node runs hundreds of times a second, have a second
    pool of their own (``max_connections`` at most, opened on demand: a node uses one per producer
    fetching at that moment plus one for the acker, usually two). Its sessions are set up for those
    two statements only, prepare them on first use, and never wait behind other work.

    The ``errors`` column is a JSON array where oban-py or Conveyor created ``oban_jobs`` and a
    ``jsonb[]`` where Elixir Oban did. The engine reads its type from the catalog once (on ``open``,
    ``install`` and ``check_schema``, or at the first ack if the table appeared later) and composes
    ``ack_jobs`` with the matching append; reading works for both unchanged.
    """

    name = "postgres"
    #: Whether the warning that notifications are off behind a transaction pooler was logged.
    _said_polling = False

    def __repr__(self) -> str:
        return f"PostgresEngine(prefix={self.prefix!r})"

    # -- inserting ---------------------------------------------------------------------------
    async def insert(
        self,
        requests: Iterable[JobRequest],
        *,
        conn: Any = None,
        now: datetime | None = None,
        hold: Sequence[int] = (),
    ) -> JobIds:
        with step_names_kept():
            if conn is not None:
                driver = await foreign.async_driver_connection(conn)
                return await self._inserter.insert(driver, requests, now, hold)
            # getconn and putconn rather than ``pool.connection()``, as in ``blocking``: its
            # context manager and the connection's own (a commit, of nothing in autocommit) cost
            # more than the rest of a single insert's Python. putconn rolls back a connection left
            # in a transaction and closes one a cancellation left in a query.
            pool = self.pool
            own = await pool.getconn()
            try:
                return await self._inserter.insert(own, requests, now, hold, side=pool)
            finally:
                await pool.putconn(own)

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
        # One transaction: wait for the lock's earlier enqueuers (an advisory lock of the
        # transaction), read its holder afresh (READ COMMITTED: each statement sees what committed
        # before it began, the earlier enqueuer's workflow included), then take it and insert.
        at = naive_utc(now) or datetime.now(UTC).replace(tzinfo=None)
        with step_names_kept():
            async with self.pool.connection() as own, own.transaction():
                await own.execute(self.sql["workflow_lock_take"].encode(), {"key": f"{self.prefix}:{lock}"})
                cur = await own.execute(self.sql["workflow_lock_holder"].encode(), {"lock": lock})
                holder = await cur.fetchone()
                if holder is not None:
                    return str(holder[0])
                claim = {"id": workflow_id, "name": name, "lock": lock, "now": at}
                await own.execute(self.sql["workflow_lock_claim"].encode(), claim)
                return await self._inserter.insert(own, requests, now, hold)

    def insert_sync(
        self,
        requests: Iterable[JobRequest],
        *,
        conn: Any,
        now: datetime | None = None,
        hold: Sequence[int] = (),
    ) -> JobIds:
        with step_names_kept():
            return self._inserter.insert_sync(foreign.sync_driver_connection(conn), requests, now, hold)

    def blocking_inserts(self) -> PostgresBlockingInsert:
        """Inserts from a plain thread on a blocking pool of their own (``blocking``)."""
        self.pool  # noqa: B018 -- open, or EngineClosedError: the probe has told a bad URL already
        return PostgresBlockingInsert(
            self.dsn,
            name=f"conveyor-{self.prefix}-blocking",
            max_size=self._max_connections,
            inserter=self._inserter,
            pooled=lambda: self.transaction_pooled,
        )

    # -- polling -----------------------------------------------------------------------------
    async def waiting_queues(self, queues: Sequence[str]) -> set[str]:
        names = check_queues(queues)
        if not names:
            return set()
        async with self.pool.connection() as conn:
            cur = await conn.execute(self.sql["waiting_queues"].encode(), {"queues": names})
            return {row[0] for row in await cur.fetchall()}

    async def poll_queues(self, name: str, queues: Sequence[str], *, awake: Sequence[str]) -> QueuePoll:
        names, awake_names = check_queues(queues), check_queues(awake)
        if not names and not awake_names:
            return QueuePoll(frozenset(), {})
        params = {"name": name, "queues": names, "awake": awake_names}
        async with self.pool.connection() as conn:
            cur = await conn.execute(self.sql["poll_queues"].encode(), params)
            rows = await cur.fetchall()
        states = {row[1]: QueueState(paused=row[2], limit=row[3]) for row in rows if row[0] == "state"}
        states = with_limits(states, [(row[1], row[4]) for row in rows if row[0] == "limits"])
        return QueuePoll(frozenset(row[1] for row in rows if row[0] == "waiting"), states)

    # -- notifications -----------------------------------------------------------------------
    async def notify(self, name: str, payload: dict[str, Any]) -> None:
        async with self.pool.connection() as conn:
            await conn.execute(
                "SELECT pg_notify(%s, %s)", (channel(self.prefix, name), payloads.encode(payload))
            )

    async def listen(
        self, names: Iterable[str], handler: NotificationHandler
    ) -> PostgresListener | pooler.SilentListener:
        if self.listen_url is None and self.transaction_pooled:
            # LISTEN through a transaction pooler registers on a session the client then leaves:
            # it would hear nothing, silently. Say so once; the callers poll.
            if not self._said_polling:
                self._said_polling = True
                log.warning(pooler.POLLING_WARNING)
            return pooler.SilentListener()
        dsn = self.listen_url or self.dsn
        listener = PostgresListener(dsn, self.prefix, names, handler, on_reconnect=self._server_back)
        await listener.start()
        return listener

    def is_transient(self, exc: BaseException) -> bool:
        if pooler.is_pooler_error(exc):
            self.pooler_error(exc)  # retried, without prepared statements from now on
        return faults.is_transient(exc)

    def explain(self, exc: BaseException) -> str | None:
        return faults.explain(exc)
