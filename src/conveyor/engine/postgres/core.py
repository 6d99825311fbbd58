"""The core every duty of ``PostgresEngine`` shares: the two pools, opening and closing, the schema,
and the type of the ``errors`` column."""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import AsyncIterator
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool

from conveyor._options import check_prefix
from conveyor.engine._sqlfiles import SqlFiles, without_comment_lines
from conveyor.engine.postgres import foreign, pool_log, schema
from conveyor.engine.postgres import pooler as poolers
from conveyor.engine.postgres.connect import BUSY_PATIENCE, CONNECT_TIMEOUT, connect_once
from conveyor.engine.postgres.inserter import Inserter
from conveyor.engine.postgres.pool import LivePool
from conveyor.engine.postgres.rows import read_result
from conveyor.engine.postgres.sessions import (
    configure_hot_session,
    configure_session,
    hot_session,
    json_loaders,
)
from conveyor.engine.roles.schema import SchemaReport
from conveyor.errors import EngineClosedError, SchemaError, ValidationError
from conveyor.job import Job

log = logging.getLogger("conveyor.engine")


#: The fragments of every claim (fetch_jobs.sql, fetch_partitioned.sql), in the order they are
#: pasted: claim_update.sql holds the others. The runs being stopped (stopping_ids.sql) are read
#: once per claim, in the CTE ``stopping`` that lock_free.sql and running_jobs.sql look in.
CLAIM_PARTS = {
    "claim_update": "claim_update",
    "job_columns": "job_columns",
    "lock_free": "lock_free",
    "claimed_meta": "claimed_meta",
    # After room (fetch_room.sql holds running_jobs), running_jobs before still_running: each
    # holds the next.
    "running_jobs": "running_jobs",
    "still_running": "still_running",
    "stopping_ids": "stopping_ids",
}


def channel(prefix: str, name: str) -> str:
    """Oban's channel naming: ``<prefix>.oban_<name>``."""
    return f"{prefix}.oban_{name}"


#: Seconds a pool keeps retrying a lost connection before it starts over. psycopg_pool waits 1 s after
#: a failed attempt and doubles the wait each time until this timeout (5 minutes by default), so after
#: a long outage it could notice the server was back 8, 16, 32 s late. Capped like this the waits
#: never pass ~1 s: see ``_reconnect_again`` for what follows a series that gave up.
RECONNECT_TIMEOUT = 2.0


#: Seconds a pooled connection may stay unused before the pool closes it (down to its minimum: one
#: connection in the main pool, none in the hot pool). psycopg_pool closes at most one per period, so
#: the default 10 minutes let a node that grew its pools during a burst keep them for an hour, and
#: three idle nodes held every slot of a server with ``max_connections=20`` (issue 32).
POOL_MAX_IDLE = 60.0


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


def hot_text(statement: str) -> bytes:
    """A statement of the hot path as sent: without comment lines (``without_comment_lines``: under
    psycopg's size limit for caching its conversion), encoded once."""
    return without_comment_lines(statement).encode()


class PostgresCore:
    """The pools and the state of one engine (see ``PostgresEngine``); the duty classes build on it."""

    def __init__(
        self,
        dsn: str,
        *,
        prefix: str = "public",
        min_connections: int = 1,
        max_connections: int = 10,
        synchronous_commit: bool = True,
        pooler: str = "auto",
        listen_url: str | None = None,
    ) -> None:
        if not isinstance(synchronous_commit, bool):
            problem = "must be true or false (a boolean, not a string or number)"
            raise ValidationError("synchronous_commit", synchronous_commit, problem)
        if listen_url is not None and (not isinstance(listen_url, str) or not listen_url.strip()):
            raise ValidationError("listen_url", listen_url, "must be a non-empty URL string")
        self.dsn = dsn
        #: Where LISTEN connects: a direct URL when ``dsn`` goes through a transaction pooler.
        self.listen_url = listen_url
        #: The pooler setting as given (``pooler.MODES``), and whether the engine treats the
        #: connection as a transaction pooler's (known for "auto" once open).
        self.pooler = poolers.check_pooler(pooler)
        self.transaction_pooled = self.pooler == "transaction"
        #: The hot pool's session settings (``hot_session``), or with a transaction pooler the
        #: ones its fetches and acks set per transaction (``pooler.hot_settings``).
        self.hot_session = hot_session(synchronous_commit=synchronous_commit)
        self._pooled_hot = poolers.hot_settings(synchronous_commit=synchronous_commit)
        self.prefix = check_prefix(prefix)
        self.sql = SqlFiles(schema.SQL_PACKAGE, prefix)
        self.insert_channel = channel(prefix, "insert")
        self.signal_channel = channel(prefix, "signal")
        self.leader_channel = channel(prefix, "leader")
        self.ended_channel = channel(prefix, "ended")
        self.inbox_channel = channel(prefix, "inbox")
        self._min_connections, self._max_connections = min_connections, max_connections
        self._pool, self._hot_pool = self._new_pools()
        # Encoded once: psycopg would encode the text (and hash the bytes) on every call.
        parts = CLAIM_PARTS
        self._fetch_statement = hot_text(
            self.sql.compose(
                "fetch_jobs",
                room="nothing",
                demand="fetch_demand",
                record_starts="nothing",
                claimed_rows="claimed_rows",
                **parts,
            )
        )
        # Starts of an unpartitioned rate limit count against the partition ''.
        limited = self.sql.compose(
            "fetch_jobs",
            room="fetch_room",
            demand="fetch_demand_limited",
            record_starts="record_starts",
            claimed_rows="claimed_limited",
            **parts,
        )
        self._fetch_limited_statement = hot_text(limited.replace("{rate_key}", "''"))
        #: Claims under partitioned limits, by the shapes of their partitions (hot_path).
        self._partitioned: dict[Any, bytes] = {}
        #: The settle and sweep statements, composed at first use (workflows).
        self._settle_statements: dict[str, bytes] = {}
        self._lock_queue_statement = self.sql["lock_queue"].encode()
        # Composed once the type of the errors column is known (see _detect_errors_type).
        self._ack_statement: bytes | None = None
        self._errors_type: str | None = None
        self._inserter = Inserter(self.sql, self.insert_channel, schema.ERRORS_APPEND)
        self._opened = False

    async def open(self) -> None:
        if not self._opened:
            # Fail in seconds, with the server's reason, when the database cannot be reached at all.
            # A server with no free slot (or starting up) is waited for a while, not hammered.
            probe_class = self._pool.connection_class
            probe = await connect_once(self.dsn, patience=BUSY_PATIENCE, connection_class=probe_class)
            try:
                if self.pooler == "auto" and await poolers.detect(probe):
                    log.warning(poolers.detected_warning())
                    self.transaction_pooled = True
            except BaseException:
                await probe.close()
                raise
            self._pool.hand_over(probe)  # its first connection (pool.py)
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

    def abandon(self) -> None:
        if not self._opened:
            return
        self._opened = False
        for pool in (self._pool, self._hot_pool):
            # The pool's tasks died with their loop; its idle connections are closed here, the
            # ones handed out (if any) when they are collected.
            for conn in list(getattr(pool, "_pool", ())):
                with contextlib.suppress(Exception):
                    conn.pgconn.finish()
        self._pool, self._hot_pool = self._new_pools()

    def _new_pools(self) -> tuple[LivePool, LivePool]:
        # The callbacks look at transaction_pooled on every connection: "auto" learns it when the
        # engine opens, and the first pooler error met at run time (``pooler_error``) sets it.
        # LivePool: a connection the server closed while it sat idle is never handed out.
        watched = poolers.watched_connection(self.pooler_error, lambda: self.transaction_pooled)
        name, hot_name = f"conveyor-{self.prefix}", f"conveyor-{self.prefix}-hot"
        pool = LivePool(
            self.dsn,
            min_size=self._min_connections,
            max_size=self._max_connections,
            max_idle=POOL_MAX_IDLE,
            kwargs={"autocommit": True},
            connection_class=watched,
            configure=pool_log.reporting(name, self.dsn, self._configure),
            open=False,
            name=name,
            reconnect_timeout=RECONNECT_TIMEOUT,
            reconnect_failed=_reconnect_again,
        )
        hot_pool = LivePool(
            self.dsn,
            min_size=0,
            max_size=self._max_connections,
            max_idle=POOL_MAX_IDLE,
            # Prepared at once: these two statements are the whole workload of these sessions.
            kwargs={"autocommit": True, "prepare_threshold": 0},
            connection_class=watched,
            configure=pool_log.reporting(hot_name, self.dsn, functools.partial(self._configure, hot=True)),
            open=False,
            name=hot_name,
            reconnect_timeout=RECONNECT_TIMEOUT,
            reconnect_failed=_reconnect_again,
        )
        return pool, hot_pool

    async def _configure(self, conn: psycopg.AsyncConnection[Any], *, hot: bool = False) -> None:
        """A new connection of either pool (``hot``): see ``_configure`` and ``configure_hot_session``;
        through a transaction pooler, the same loaders and no session state (``pooler.configure``)."""
        if not self.transaction_pooled:
            await (configure_hot_session(conn, session=self.hot_session) if hot else configure_session(conn))
        else:
            json_loaders(conn)
            poolers.configure(conn)

    def pooler_error(self, exc: BaseException) -> None:
        """A statement failed as session state fails through a transaction pooler: from now on,
        prepare nothing and set nothing on new sessions (see ``pooler.RUNTIME_WARNING``)."""
        if not self.transaction_pooled:
            self.transaction_pooled = True
            log.warning(poolers.RUNTIME_WARNING, exc)

    @property
    def pool(self) -> AsyncConnectionPool:
        if not self._opened:
            raise EngineClosedError("the PostgreSQL engine is not open; call await engine.open()")
        return self._pool

    async def set_local(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Inside a transaction of the hot path: through a transaction pooler, apply what
        ``pooled_hot_settings`` keeps with ``SET LOCAL`` (they end with the transaction, on
        whichever server session it ran). Otherwise the sessions have them already: nothing."""
        if self.transaction_pooled and self._pooled_hot:
            setting = "; ".join(f"SET LOCAL {name} = {value}" for name, value in self._pooled_hot.items())
            await conn.execute(setting.encode(), prepare=False)

    @contextlib.asynccontextmanager
    async def hot_transaction(self, conn: psycopg.AsyncConnection[Any]) -> AsyncIterator[None]:
        """Around one fetch or ack: a transaction with ``set_local`` where it has settings to
        apply, else nothing (the statement commits by itself, one round trip)."""
        if not (self.transaction_pooled and self._pooled_hot):
            yield
            return
        async with conn.transaction():
            await self.set_local(conn)
            yield

    @property
    def hot_pool(self) -> AsyncConnectionPool:
        """The connections of fetch_jobs and ack_jobs (see the docstring of ``PostgresEngine``)."""
        if not self._opened:
            raise EngineClosedError("the PostgreSQL engine is not open; call await engine.open()")
        return self._hot_pool

    # -- schema ------------------------------------------------------------------------------
    async def install(self) -> int:
        async with self._migration_connection() as conn:
            version = await schema.migrate(conn, self.prefix)
        await self._detect_errors_type()
        return version

    @contextlib.asynccontextmanager
    async def _migration_connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """Where migrations run: a session of their own, since they hold a session advisory lock
        and session settings across their steps. Behind a transaction pooler each step could land
        on another server session (the lock then stays on one that other clients get, and every
        later migration waits for it forever), so they go to ``listen_url``, the direct URL, or
        are refused before anything runs."""
        if not self.transaction_pooled:
            async with self.pool.connection() as conn:
                yield conn
            return
        if self.listen_url is None:
            raise SchemaError(poolers.migration_refusal(self.pooler))
        async with await connect_once(self.listen_url) as conn:
            yield conn

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
        append_error = schema.ERRORS_APPEND[found or "jsonb"]
        statement = hot_text(self.sql.compose("ack_jobs", append_error=append_error))
        self._errors_type = self._inserter.errors_type = found
        self._ack_statement = statement if found is not None else None
        return statement

    async def schema_version(self) -> int | None:
        async with self.pool.connection() as conn:
            return await schema.installed_version(conn, self.prefix)

    async def check_schema(self) -> None:
        """Fail with a clear message when the schema is missing, older than this Conveyor, or lacks
        a table its migrations create (say, after `oban uninstall`)."""
        async with self.pool.connection() as conn:
            problem = await schema.check(conn, self.prefix)
        if problem is not None:
            raise SchemaError(problem)
        await self._detect_errors_type()

    async def inspect_schema(self, *, create: bool = False, patient: bool = False) -> SchemaReport:
        # ``create`` changes nothing here: a server's database is never created by Conveyor.
        conn = await connect_once(self.dsn, CONNECT_TIMEOUT, patience=BUSY_PATIENCE if patient else 0.0)
        async with conn:
            version = await schema.installed_version(conn, self.prefix)
            missing = await schema.missing_objects(conn, self.prefix) if version is not None else []
        options = "" if self.prefix == "public" else f" --prefix {self.prefix}"
        where = f"the Conveyor schema in {self.prefix!r}"
        return SchemaReport(version, tuple(name for _, name in missing), where, options)

    async def migration_plan(self) -> str:
        conn = await connect_once(self.dsn, CONNECT_TIMEOUT)
        async with conn:
            plan = await schema.plan(conn, self.prefix)
        body = plan.render()
        return f"schema {self.prefix!r}: {plan.headline('would apply')}" + (f"\n{body}" if body else "")

    # -- shared by the duties ----------------------------------------------------------------
    async def _fetch_jobs(self, statement: str, params: dict[str, Any]) -> list[Job]:
        async with self.pool.connection() as conn:
            cur = await conn.execute(statement.encode(), params)
            return await read_result(cur)

    async def _fetch_ids(self, statement: str, params: dict[str, Any], conn: Any = None) -> list[int]:
        """The ids one statement returns, on the pool or, with ``conn``, in a caller's transaction
        (one statement is atomic by itself, and its notifications go out with the caller's commit)."""
        if conn is not None:
            driver = await foreign.async_driver_connection(conn)
            return [row[0] for row in await foreign.fetch_rows(driver, statement.encode(), params)]
        async with self.pool.connection() as own:
            cur = await own.execute(statement.encode(), params)
            return [row[0] for row in await cur.fetchall()]

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
