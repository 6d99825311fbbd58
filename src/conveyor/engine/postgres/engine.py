"""``PostgresEngine``: the engine for a fleet of nodes sharing one PostgreSQL database."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson
import psycopg
from psycopg.adapt import Loader
from psycopg.types.json import set_json_loads
from psycopg_pool import AsyncConnectionPool

from conveyor.acks import Ack
from conveyor.engine import payloads
from conveyor.engine.base import NotificationHandler
from conveyor.engine.postgres import faults, foreign, schema
from conveyor.engine.postgres.connect import connect_once
from conveyor.engine.postgres.inserter import Inserter
from conveyor.engine.postgres.listener import PostgresListener
from conveyor.engine.postgres.rows import aware, naive_utc, read_jobs, request_record, salvage_rows
from conveyor.engine.sqlfiles import SqlFiles
from conveyor.errors import EngineClosedError, SchemaError
from conveyor.filters import JobFilter
from conveyor.fleet import CronTick, LeaderInfo, ProducerBeat, ProducerInfo, QueueState, RescueResult
from conveyor.job import Job
from conveyor.options import check_prefix
from conveyor.request import JobRequest

log = logging.getLogger("conveyor.engine")


def channel(prefix: str, name: str) -> str:
    """Oban's channel naming: ``<prefix>.oban_<name>``."""
    return f"{prefix}.oban_{name}"


class _JsonTextLoader(Loader):
    """json and jsonb in text format, parsed by orjson straight from psycopg's buffer.

    psycopg's own JSON loader copies the buffer to bytes and calls the function from a Python method;
    with ``load`` being orjson's C function itself, a fetched job's args, meta and errors cost about
    a microsecond less each.
    """

    load = staticmethod(orjson.loads)  # type: ignore[assignment]


async def _configure(conn: psycopg.AsyncConnection[Any]) -> None:
    set_json_loads(orjson.loads, conn)  # binary format, should a statement ask for it
    conn.adapters.register_loader("json", _JsonTextLoader)
    conn.adapters.register_loader("jsonb", _JsonTextLoader)
    # Job times come back as timestamptz (job_columns.sql); in a UTC session psycopg hands them over
    # with datetime.UTC attached. Every statement reads the clock as timezone('UTC', now()), so the
    # session zone changes nothing else.
    await conn.execute("SET TIME ZONE 'UTC'", prepare=False)


async def _configure_hot(conn: psycopg.AsyncConnection[Any]) -> None:
    await _configure(conn)
    # Only fetch_jobs.sql and ack_jobs.sql run here, and both are written so that one generic plan
    # fits every call: a custom plan per call costs 0.1 to 0.2 ms of planning, more than a tenth of
    # the statement. Sequential and bitmap scans are ruled out because a generic plan is kept until
    # the statistics change: one made while the table was tiny (a seq scan, or a bitmap scan and a
    # sort) would otherwise read the whole queue on every fetch once it has grown.
    await conn.execute(
        "SET plan_cache_mode = force_generic_plan; SET enable_seqscan = off; SET enable_bitmapscan = off",
        prepare=False,
    )


async def _read_jobs(cur: psycopg.AsyncCursor[Any]) -> list[Job]:
    """The jobs of a statement's result. A row that cannot be decoded as it is comes back with
    ``Job.unreadable`` set (``salvage_rows``) instead of failing the rows around it."""
    try:
        return read_jobs(await cur.fetchall())
    except Exception:
        return salvage_rows(cur)


#: Seconds a pool keeps retrying a lost connection before it starts over. psycopg_pool waits 1 s after
#: a failed attempt and doubles the wait each time until this timeout (5 minutes by default), so after
#: a long outage it could notice the server was back 8, 16, 32 s late. Capped like this the waits
#: never pass ~1 s: see ``_reconnect_again`` for what follows a series that gave up.
RECONNECT_TIMEOUT = 2.0


async def _reconnect_again(pool: AsyncConnectionPool) -> None:
    """``reconnect_failed`` of both pools: a series of attempts gave up (after ``RECONNECT_TIMEOUT``).

    psycopg_pool would then leave the connection out until a new client asks for one, but during an
    outage every service of the node is already waiting for one, so nothing would ask. While a
    client waits, or the pool is below its minimum, start a new series at once (``check`` grows the
    pool by one connection, and drops dead idle ones)."""
    if pool.closed:
        return
    stats = pool.get_stats()
    if stats.get("requests_waiting", 0) > 0 or stats.get("pool_size", 0) < pool.min_size:
        await pool.check()


class PostgresEngine:
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

    def __init__(
        self,
        dsn: str,
        *,
        prefix: str = "public",
        min_connections: int = 1,
        max_connections: int = 10,
    ) -> None:
        self.dsn = dsn
        self.prefix = check_prefix(prefix)
        self.sql = SqlFiles(schema.SQL_PACKAGE, prefix)
        self.insert_channel = channel(prefix, "insert")
        self.signal_channel = channel(prefix, "signal")
        self.leader_channel = channel(prefix, "leader")
        self._pool = AsyncConnectionPool(
            dsn,
            min_size=min_connections,
            max_size=max_connections,
            kwargs={"autocommit": True},
            configure=_configure,
            open=False,
            name=f"conveyor-{prefix}",
            reconnect_timeout=RECONNECT_TIMEOUT,
            reconnect_failed=_reconnect_again,
        )
        self._hot_pool = AsyncConnectionPool(
            dsn,
            min_size=0,
            max_size=max_connections,
            # Prepared at once: these two statements are the whole workload of these sessions.
            kwargs={"autocommit": True, "prepare_threshold": 0},
            configure=_configure_hot,
            open=False,
            name=f"conveyor-{prefix}-hot",
            reconnect_timeout=RECONNECT_TIMEOUT,
            reconnect_failed=_reconnect_again,
        )
        # Encoded once: psycopg would encode the text (and hash the bytes) on every call.
        self._fetch_statement = self.sql.compose("fetch_jobs", job_columns="job_columns").encode()
        # Composed once the type of the errors column is known (see _detect_errors_type).
        self._ack_statement: bytes | None = None
        self._errors_type: str | None = None
        self._inserter = Inserter(self.sql, self.insert_channel)
        self._opened = False

    def __repr__(self) -> str:
        return f"PostgresEngine(prefix={self.prefix!r})"

    async def open(self) -> None:
        if not self._opened:
            # Fail in seconds, with the server's reason, when the database cannot be reached at all.
            probe = await connect_once(self.dsn)
            await probe.close()
            await self._pool.open(wait=True)
            await self._hot_pool.open()
            self._opened = True
            try:
                # An unusable errors column is reported by check_schema and the first ack; opening
                # still succeeds, so that `conveyor uninstall` and the like keep working.
                with contextlib.suppress(SchemaError):
                    await self._detect_errors_type()
            except BaseException:
                await self.close()
                raise

    async def close(self) -> None:
        if self._opened:
            self._opened = False
            await self._hot_pool.close()
            await self._pool.close()

    @property
    def pool(self) -> AsyncConnectionPool:
        if not self._opened:
            raise EngineClosedError("the PostgreSQL engine is not open; call await engine.open()")
        return self._pool

    @property
    def hot_pool(self) -> AsyncConnectionPool:
        """The connections of fetch_jobs and ack_jobs (see the class docstring)."""
        if not self._opened:
            raise EngineClosedError("the PostgreSQL engine is not open; call await engine.open()")
        return self._hot_pool

    # -- schema ------------------------------------------------------------------------------
    async def install(self) -> int:
        async with self.pool.connection() as conn:
            version = await schema.migrate(conn, self.prefix)
        await self._detect_errors_type()
        return version

    async def uninstall(self) -> None:
        async with self.pool.connection() as conn:
            await schema.uninstall(conn, self.prefix)
        self._errors_type = self._ack_statement = None

    @property
    def errors_type(self) -> str | None:
        """The type of ``oban_jobs.errors`` as last read: ``jsonb`` (oban-py, Conveyor), ``jsonb[]``
        (Elixir Oban), or None while the table is missing."""
        return self._errors_type

    async def _detect_errors_type(self) -> bytes:
        """Read the type of the errors column and compose ``ack_jobs`` to match; return that statement.

        Without the table the statement is composed for ``jsonb`` but not kept, so the next call
        looks again; run before the table exists, it fails as any statement would.
        """
        async with self.pool.connection() as conn:
            found = await schema.errors_type(conn, self.prefix)
        statement = self.sql.compose("ack_jobs", append_error=schema.ERRORS_APPEND[found or "jsonb"]).encode()
        self._errors_type = found
        self._ack_statement = statement if found is not None else None
        return statement

    async def schema_version(self) -> int | None:
        async with self.pool.connection() as conn:
            return await schema.installed_version(conn, self.prefix)

    # -- inserting ---------------------------------------------------------------------------
    async def insert(
        self, requests: Iterable[JobRequest], *, conn: Any = None, now: datetime | None = None
    ) -> list[int]:
        if conn is not None:
            driver = await foreign.async_driver_connection(conn)
            return await self._inserter.insert(driver, requests, now)
        async with self.pool.connection() as own:
            return await self._inserter.insert(own, requests, now)

    def insert_sync(
        self, requests: Iterable[JobRequest], *, conn: Any, now: datetime | None = None
    ) -> list[int]:
        return self._inserter.insert_sync(foreign.sync_driver_connection(conn), requests, now)

    # -- managing jobs -----------------------------------------------------------------------
    @staticmethod
    def _filter_params(criteria: JobFilter) -> dict[str, Any]:
        return {
            "ids": list(criteria.ids) or None,
            "states": [s.value for s in criteria.states] or None,
            "queues": list(criteria.queues) or None,
            "workers": list(criteria.workers) or None,
            "tags": list(criteria.tags) or None,
            "before_id": criteria.before_id,
            "limit": criteria.limit,
        }

    async def _fetch_jobs(self, statement: str, params: dict[str, Any]) -> list[Job]:
        async with self.pool.connection() as conn:
            cur = await conn.execute(statement.encode(), params)
            return await _read_jobs(cur)

    async def _fetch_ids(self, statement: str, params: dict[str, Any]) -> list[int]:
        async with self.pool.connection() as conn:
            cur = await conn.execute(statement.encode(), params)
            return [row[0] for row in await cur.fetchall()]

    async def get_job(self, job_id: int) -> Job | None:
        statement = self.sql.compose("get_job", columns="job_columns")
        jobs = await self._fetch_jobs(statement, {"id": job_id})
        return jobs[0] if jobs else None

    async def list_jobs(self, criteria: JobFilter) -> list[Job]:
        statement = self.sql.compose("list_jobs", columns="job_columns", filter="job_filter")
        params = self._filter_params(criteria)
        if params["limit"] is None:
            params["limit"] = 100
        return await self._fetch_jobs(statement, params)

    async def cancel_jobs(self, criteria: JobFilter, *, now: datetime | None = None) -> list[int]:
        params = self._filter_params(criteria) | {
            "now": naive_utc(now),
            "signal_channel": self.signal_channel,
        }
        return await self._fetch_ids(self.sql.compose("cancel_jobs", filter="job_filter"), params)

    async def retry_jobs(self, criteria: JobFilter, *, now: datetime | None = None) -> list[int]:
        params = self._filter_params(criteria) | {
            "now": naive_utc(now),
            "insert_channel": self.insert_channel,
        }
        return await self._fetch_ids(self.sql.compose("retry_jobs", filter="job_filter"), params)

    async def delete_jobs(self, criteria: JobFilter) -> list[int]:
        params = self._filter_params(criteria)
        return sorted(await self._fetch_ids(self.sql.compose("delete_jobs", filter="job_filter"), params))

    async def check_schema(self) -> None:
        """Fail with a clear message when the schema is missing, older than this Conveyor, or lacks
        a table its migrations create (say, after `oban uninstall`)."""
        async with self.pool.connection() as conn:
            problem = await schema.check(conn, self.prefix)
        if problem is not None:
            raise SchemaError(problem)
        await self._detect_errors_type()

    # -- the hot path: fetch and ack ---------------------------------------------------------
    async def fetch_jobs(
        self, queue: str, demand: int, *, node: str, producer: str, now: datetime | None = None
    ) -> list[Job]:
        params = {
            "queue": queue,
            "demand": demand,
            "node": node,
            "producer": producer,
            "now": naive_utc(now),
        }
        async with self.hot_pool.connection() as conn:
            cur = await conn.execute(self._fetch_statement, params)
            return await _read_jobs(cur)

    async def ack_jobs(self, acks: Sequence[Ack], *, now: datetime | None = None) -> list[int]:
        if not acks:
            return []
        params = {
            "acks": orjson.dumps([ack.record() for ack in acks]).decode(),
            "now": naive_utc(now),
        }
        statement = self._ack_statement or await self._detect_errors_type()
        async with self.hot_pool.connection() as conn:
            cur = await conn.execute(statement, params)
            return [row[0] for row in await cur.fetchall()]

    async def release_jobs(self, attempts: Sequence[tuple[int, int]]) -> list[int]:
        if not attempts:
            return []
        params = {
            "jobs": orjson.dumps([{"id": i, "attempt": a} for i, a in attempts]).decode(),
            "insert_channel": self.insert_channel,
        }
        return await self._fetch_ids(self.sql["release_jobs"], params)

    async def stage_jobs(self, limit: int, *, now: datetime | None = None) -> dict[str, int]:
        params = {"limit": limit, "now": naive_utc(now), "insert_channel": self.insert_channel}
        async with self.pool.connection() as conn:
            cur = await conn.execute(self.sql["stage_jobs"].encode(), params)
            return {row[0]: row[1] for row in await cur.fetchall()}

    # -- notifications -----------------------------------------------------------------------
    async def notify(self, name: str, payload: dict[str, Any]) -> None:
        async with self.pool.connection() as conn:
            await conn.execute(
                "SELECT pg_notify(%s, %s)", (channel(self.prefix, name), payloads.encode(payload))
            )

    async def listen(self, names: Iterable[str], handler: NotificationHandler) -> PostgresListener:
        listener = PostgresListener(self.dsn, self.prefix, names, handler, on_reconnect=self._server_back)
        await listener.start()
        return listener

    async def _server_back(self) -> None:
        """The listener reconnected after losing its connection: the server is reachable again (it
        may have restarted). Drop the pools' idle connections that died meanwhile, and open a fresh
        one, before the node is told to fetch: its first statements then find working connections
        instead of failing on dead ones and backing off."""
        for pool in (self._pool, self._hot_pool):
            if not pool.closed:
                try:
                    await pool.check()
                except Exception as exc:  # the node retries its own statements either way
                    log.warning("checking the pool %s after a reconnect failed: %s", pool.name, exc)

    # -- leadership --------------------------------------------------------------------------
    async def elect_leader(
        self, name: str, node: str, ttl: float, *, now: datetime | None = None
    ) -> LeaderInfo | None:
        params = {"name": name, "node": node, "ttl": ttl, "now": naive_utc(now)}
        async with self.pool.connection() as conn:
            cur = await conn.execute(self.sql["elect_leader"].encode(), params)
            row = await cur.fetchone()
        return LeaderInfo(row[0], row[1].replace(tzinfo=UTC)) if row else None

    async def resign_leader(self, name: str, node: str) -> bool:
        params = {"name": name, "node": node, "leader_channel": self.leader_channel}
        return bool(await self._fetch_ids(self.sql["resign_leader"], params))

    async def get_leader(self, name: str, *, now: datetime | None = None) -> LeaderInfo | None:
        async with self.pool.connection() as conn:
            cur = await conn.execute(self.sql["get_leader"].encode(), {"name": name, "now": naive_utc(now)})
            row = await cur.fetchone()
        return LeaderInfo(row[0], row[1].replace(tzinfo=UTC), aware(row[2])) if row else None

    # -- producers and rescue ----------------------------------------------------------------
    async def record_producers(
        self, name: str, node: str, beats: Sequence[ProducerBeat], *, now: datetime | None = None
    ) -> None:
        if not beats:
            return
        records = [{"uuid": b.uuid, "queue": b.queue, "meta": b.meta} for b in beats]
        params = {
            "name": name,
            "node": node,
            "producers": orjson.dumps(records).decode(),
            "now": naive_utc(now),
        }
        async with self.pool.connection() as conn:
            await conn.execute(self.sql["upsert_producers"].encode(), params)

    async def delete_producers(self, uuids: Sequence[str]) -> None:
        async with self.pool.connection() as conn:
            await conn.execute(self.sql["delete_producers"].encode(), {"uuids": list(uuids)})

    async def list_producers(self) -> list[ProducerInfo]:
        async with self.pool.connection() as conn:
            cur = await conn.execute(self.sql["list_producers"].encode())
            rows = await cur.fetchall()
        return [
            ProducerInfo(r[0], r[1], r[2], r[3], r[4], r[5].replace(tzinfo=UTC), r[6].replace(tzinfo=UTC))
            for r in rows
        ]

    async def rescue_jobs(
        self,
        *,
        timeout: float,
        backstop: float,
        limit: int = 1000,
        live: Sequence[str] = (),
        now: datetime | None = None,
    ) -> RescueResult:
        params = {
            "timeout": timeout,
            "backstop": backstop,
            "limit": limit,
            "live": list(live),
            "now": naive_utc(now),
            "insert_channel": self.insert_channel,
        }
        async with self.pool.connection() as conn:
            cur = await conn.execute(self.sql["rescue_jobs"].encode(), params)
            rows = await cur.fetchall()
            forget = {"timeout": timeout, "live": list(live), "now": naive_utc(now)}
            await conn.execute(self.sql["delete_dead_producers"].encode(), forget)
        return RescueResult(
            available=tuple(r[0] for r in rows if r[1] == "available"),
            discarded=tuple(r[0] for r in rows if r[1] == "discarded"),
        )

    # -- pruning -----------------------------------------------------------------------------
    async def prune_jobs(
        self,
        *,
        max_age: float,
        limit: int,
        keep_per_queue: int | None = None,
        now: datetime | None = None,
    ) -> int:
        """Delete one bounded batch of old final jobs (and, with ``keep_per_queue``, one batch per
        queue beyond that many); return how many rows went."""
        async with self.pool.connection() as conn:
            cur = await conn.execute(
                self.sql["prune_jobs"].encode(), {"max_age": max_age, "limit": limit, "now": naive_utc(now)}
            )
            deleted = cur.rowcount
            if keep_per_queue is not None:
                cur = await conn.execute(self.sql["final_queues"].encode())
                for (queue,) in await cur.fetchall():
                    cur = await conn.execute(
                        self.sql["prune_queue_excess"].encode(),
                        {"queue": queue, "keep": keep_per_queue, "limit": limit},
                    )
                    deleted += cur.rowcount
            await conn.execute(
                self.sql["prune_cron_ticks"].encode(),
                {"max_age": max(max_age, 86400.0), "now": naive_utc(now)},
            )
        return deleted

    # -- cron --------------------------------------------------------------------------------
    async def insert_cron_jobs(self, ticks: Sequence[CronTick], *, now: datetime | None = None) -> list[int]:
        """Insert the job of each tick not handled before (by anyone); return the new job ids."""
        if not ticks:
            return []
        records = [request_record(t.request) | {"name": t.name, "tick": t.tick} for t in ticks]
        params = {
            "entries": orjson.dumps(records).decode(),
            "now": naive_utc(now),
            "insert_channel": self.insert_channel,
        }
        return await self._fetch_ids(self.sql["insert_cron_jobs"], params)

    async def last_cron_ticks(self, names: Sequence[str]) -> dict[str, datetime]:
        async with self.pool.connection() as conn:
            cur = await conn.execute(self.sql["last_cron_ticks"].encode(), {"names": list(names)})
            return {row[0]: row[1].replace(tzinfo=UTC) for row in await cur.fetchall()}

    # -- queue state -------------------------------------------------------------------------
    async def save_queue_state(
        self, name: str, queue: str, *, paused: bool | None = None, limit: int | None = None
    ) -> None:
        params = {"name": name, "queue": queue, "paused": paused, "limit": limit}
        async with self.pool.connection() as conn:
            await conn.execute(self.sql["save_queue_state"].encode(), params)

    async def load_queue_states(self, name: str) -> dict[str, QueueState]:
        async with self.pool.connection() as conn:
            cur = await conn.execute(self.sql["load_queue_states"].encode(), {"name": name})
            return {row[0]: QueueState(paused=row[1], limit=row[2]) for row in await cur.fetchall()}

    async def still_executing(self, attempts: Sequence[tuple[int, int]]) -> set[int]:
        if not attempts:
            return set()
        params = {"jobs": orjson.dumps([{"id": i, "attempt": a} for i, a in attempts]).decode()}
        return set(await self._fetch_ids(self.sql["still_executing"], params))

    async def lost_claims(
        self, producers: Sequence[str], *, older_than: float, now: datetime | None = None
    ) -> list[tuple[int, int]]:
        if not producers:
            return []
        params = {"producers": list(producers), "older_than": older_than, "now": naive_utc(now)}
        async with self.pool.connection() as conn:
            cur = await conn.execute(self.sql["lost_claims"].encode(), params)
            return [(row[0], row[1]) for row in await cur.fetchall()]

    def is_transient(self, exc: BaseException) -> bool:
        return faults.is_transient(exc)
