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

import asyncio
import os
import sqlite3
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

import orjson

from conveyor.acks import Ack
from conveyor.engine.base import NotificationHandler
from conveyor.engine.sqlite import database, foreign, inserter, schema
from conveyor.engine.sqlite.database import MEMORY, Database, Tx, is_transient
from conveyor.engine.sqlite.listener import SqliteListener
from conveyor.engine.sqlite.rows import (
    InsertRows,
    check_now,
    fetch_order,
    later_text,
    parse_optional_time,
    parse_time,
    read_jobs,
    time_text,
    utc_clock,
)
from conveyor.errors import ConveyorError, EngineClosedError, SchemaError, ValidationError
from conveyor.filters import JobFilter
from conveyor.fleet import CronTick, LeaderInfo, ProducerBeat, ProducerInfo, QueueState, RescueResult
from conveyor.job import Job
from conveyor.request import JobRequest

FILES = schema.FILES
COLUMNS = FILES["job_columns"].strip()
#: The filter fragments, in the order they are combined with AND, by JobFilter field.
FILTER_PARTS = ("ids", "states", "queues", "workers", "tags", "before_id")
DEFAULT_LIST_LIMIT = 100
#: The statements use ->> (3.38), RETURNING (3.35) and UPDATE ... FROM (3.33).
MINIMUM_SQLITE = (3, 38, 0)


def _filter(criteria: JobFilter) -> tuple[str, dict[str, Any]]:
    """The WHERE condition for ``criteria`` (only the parts it uses) and its parameters."""
    values: dict[str, Any] = {
        "ids": list(criteria.ids),
        "states": [s.value for s in criteria.states],
        "queues": list(criteria.queues),
        "workers": list(criteria.workers),
        "tags": list(criteria.tags),
        "before_id": criteria.before_id,
    }
    used = tuple(name for name in FILTER_PARTS if values[name] not in (None, []))
    params: dict[str, Any] = {
        name: orjson.dumps(values[name]).decode() if name != "before_id" else values[name] for name in used
    }
    return _condition(used), params


_conditions: dict[tuple[str, ...], str] = {}


def _condition(used: tuple[str, ...]) -> str:
    found = _conditions.get(used)
    if found is None:
        found = "\n  AND ".join(FILES[f"filter_{name}"].strip() for name in used) or "1"
        _conditions[used] = found
    return found


def _statement(name: str, condition: str) -> str:
    return FILES[name].replace("{columns}", COLUMNS).replace("{filter}", condition)


class SqliteEngine:
    """Runs every Conveyor statement on one SQLite database file (or ``:memory:``)."""

    name = "sqlite"

    def __init__(
        self,
        path: str | os.PathLike[str] = "conveyor.db",
        *,
        prefix: str = schema.DEFAULT_PREFIX,
        busy_timeout: float = database.DEFAULT_BUSY_TIMEOUT,
    ) -> None:
        self.prefix = schema.check_prefix(prefix)
        if sqlite3.sqlite_version_info < MINIMUM_SQLITE:
            raise ConveyorError(
                f"the SQLite engine needs SQLite {'.'.join(map(str, MINIMUM_SQLITE))} or newer; "
                f"this Python's sqlite3 module uses {sqlite3.sqlite_version}"
            )
        raw = os.fspath(path)
        if not raw:
            raise ValidationError("path", raw, "must name a database file or ':memory:'")
        #: The absolute path of the database file, or ":memory:".
        self.path = raw if raw == MEMORY else os.path.abspath(raw)
        if isinstance(busy_timeout, bool) or not isinstance(busy_timeout, int | float) or busy_timeout < 0:
            raise ValidationError("busy_timeout", busy_timeout, "must be a number of seconds >= 0")
        self.busy_timeout = float(busy_timeout)
        self._db: Database | None = None
        self._fetch = _statement("fetch_jobs", "")
        self._get = _statement("get_job", "")

    def __repr__(self) -> str:
        return f"SqliteEngine({self.path!r})"

    @property
    def url(self) -> str:
        return "sqlite://:memory:" if self.path == MEMORY else f"sqlite:///{self.path}"

    # -- lifecycle ---------------------------------------------------------------------------
    async def open(self) -> None:
        if self._db is None:
            db = await asyncio.to_thread(database.acquire, self.path, busy_timeout=self.busy_timeout)
            if self._db is None:
                self._db = db
            else:  # another task opened it meanwhile
                database.release(db)

    async def close(self) -> None:
        if self._db is not None:
            db, self._db = self._db, None
            database.release(db)

    @property
    def database(self) -> Database:
        if self._db is None:
            raise EngineClosedError("the SQLite engine is not open; call await engine.open()")
        return self._db

    # -- schema ------------------------------------------------------------------------------
    async def install(self) -> int:
        return await self.database.write(lambda tx: schema.migrate(tx.conn))

    async def uninstall(self) -> None:
        await self.database.write(lambda tx: schema.uninstall(tx.conn))

    async def schema_version(self) -> int | None:
        return await self.database.read(schema.installed_version)

    async def check_schema(self) -> None:
        """Fail with a clear message when the schema is missing, older than this Conveyor, or lacks
        a table its migrations create."""
        where, options = f"the Conveyor schema in {self.path}", f" --dsn {self.url}"
        problem = await self.database.read(lambda conn: schema.check(conn, where, options))
        if problem is not None:
            raise SchemaError(problem)

    # -- inserting ---------------------------------------------------------------------------
    async def insert(
        self, requests: Iterable[JobRequest], *, conn: Any = None, now: datetime | None = None
    ) -> list[int]:
        check_now(now)
        if conn is not None:
            driver = await foreign.async_driver_connection(conn)
            first, rest = inserter.split(requests)
            if not first:
                return []
            builder = InsertRows(utc_clock(now))
            steps = inserter.insert_steps(inserter.chunk_values(first, rest, builder), builder, None)
            async with foreign.atomic_async(driver):
                inserted = await inserter.run_async(driver, steps)
            return inserted.ids
        first, rest = inserter.split(requests)
        if not first:
            return []

        def run(tx: Tx) -> list[int]:
            builder = InsertRows(utc_clock(now))
            chunks = inserter.chunk_values(first, rest, builder)
            steps = inserter.insert_steps(chunks, builder, tx.db.token, notify=tx.db.shared)
            done = inserter.run_sync(tx.conn, steps)
            for queue in done.queues:
                tx.notify("insert", {"queue": queue}, builder.clock_text, written=True)
            return done.ids

        # Not retried as a whole: it consumes the caller's iterable (taking the lock is retried).
        return await self.database.write(run, retry=False)

    def insert_sync(
        self, requests: Iterable[JobRequest], *, conn: Any, now: datetime | None = None
    ) -> list[int]:
        check_now(now)
        driver = foreign.sync_driver_connection(conn)
        first, rest = inserter.split(requests)
        if not first:
            return []
        builder = InsertRows(utc_clock(now))
        steps = inserter.insert_steps(inserter.chunk_values(first, rest, builder), builder, None)
        with foreign.atomic_sync(driver):
            inserted = inserter.run_sync(driver, steps)
        return inserted.ids

    # -- managing jobs -----------------------------------------------------------------------
    async def get_job(self, job_id: int) -> Job | None:
        statement = self._get

        def run(conn: sqlite3.Connection) -> list[Any]:
            return conn.execute(statement, {"id": job_id}).fetchall()

        rows = await self.database.read(run)
        return read_jobs(rows)[0] if rows else None

    async def list_jobs(self, criteria: JobFilter) -> list[Job]:
        condition, params = _filter(criteria)
        params["limit"] = criteria.limit if criteria.limit is not None else DEFAULT_LIST_LIMIT
        statement = _statement("list_jobs", condition)

        def run(conn: sqlite3.Connection) -> list[Any]:
            return conn.execute(statement, params).fetchall()

        return read_jobs(await self.database.read(run))

    async def cancel_jobs(self, criteria: JobFilter, *, now: datetime | None = None) -> list[int]:
        check_now(now)
        condition, params = _filter(criteria)
        params["limit"] = _limit(criteria)
        targets_sql = _statement("cancel_targets", condition)
        cancel_sql = FILES["cancel_jobs"]

        def run(tx: Tx) -> list[int]:
            targets = tx.conn.execute(targets_sql, params).fetchall()
            if not targets:
                return []
            clock = time_text(utc_clock(now))
            ids = orjson.dumps([row[0] for row in targets]).decode()
            cancelled = [row[0] for row in tx.conn.execute(cancel_sql, {"ids": ids, "now": clock})]
            for job_id, state in targets:
                if state == "executing":
                    tx.notify("signal", {"action": "pkill", "job_id": job_id}, clock)
            return sorted(cancelled)

        return await self.database.write(run)

    async def retry_jobs(self, criteria: JobFilter, *, now: datetime | None = None) -> list[int]:
        check_now(now)
        condition, params = _filter(criteria)
        params["limit"] = _limit(criteria)
        statement = _statement("retry_jobs", condition)

        def run(tx: Tx) -> list[int]:
            clock = time_text(utc_clock(now))
            rows = tx.conn.execute(statement, params | {"now": clock}).fetchall()
            for queue in sorted({row[1] for row in rows}):
                tx.notify("insert", {"queue": queue}, clock)
            return sorted(row[0] for row in rows)

        return await self.database.write(run)

    async def delete_jobs(self, criteria: JobFilter) -> list[int]:
        condition, params = _filter(criteria)
        params["limit"] = _limit(criteria)
        statement = _statement("delete_jobs", condition)

        def run(tx: Tx) -> list[int]:
            return sorted(row[0] for row in tx.conn.execute(statement, params).fetchall())

        return await self.database.write(run)

    # -- the hot path ------------------------------------------------------------------------
    async def fetch_jobs(
        self, queue: str, demand: int, *, node: str, producer: str, now: datetime | None = None
    ) -> list[Job]:
        check_now(now)
        if isinstance(demand, bool) or not isinstance(demand, int) or demand < 0:
            raise ValidationError("demand", demand, "must be an integer >= 0")
        if demand == 0:
            return []
        statement = self._fetch
        params = {"queue": queue, "demand": demand, "node": node, "producer": producer}

        def run(tx: Tx) -> list[Any]:
            return tx.conn.execute(statement, params | {"now": time_text(utc_clock(now))}).fetchall()

        jobs = read_jobs(await self.database.write(run))
        jobs.sort(key=fetch_order)
        return jobs

    async def ack_jobs(self, acks: Sequence[Ack], *, now: datetime | None = None) -> list[int]:
        check_now(now)
        if not acks:
            return []
        statement = FILES["ack_jobs"]

        def run(tx: Tx) -> list[int]:
            clock = utc_clock(now)
            records = [
                {
                    "id": ack.job_id,
                    "attempt": ack.attempt,
                    "state": ack.state.value,
                    "scheduled_at": later_text(clock, ack.schedule_in),
                    "error": ack.error,
                    "meta": ack.meta,
                    "snoozed": ack.snoozed,
                }
                for ack in acks
            ]
            params = {"acks": orjson.dumps(records).decode(), "now": time_text(clock)}
            return [row[0] for row in tx.conn.execute(statement, params).fetchall()]

        return await self.database.write(run)

    async def release_jobs(self, attempts: Sequence[tuple[int, int]]) -> list[int]:
        if not attempts:
            return []
        given = orjson.dumps([{"id": i, "attempt": a} for i, a in attempts]).decode()
        statement = FILES["release_jobs"]

        def run(tx: Tx) -> list[int]:
            rows = tx.conn.execute(statement, {"jobs": given}).fetchall()
            clock = time_text(utc_clock(None))
            for queue in sorted({row[1] for row in rows}):
                tx.notify("insert", {"queue": queue}, clock)
            return sorted(row[0] for row in rows)

        return await self.database.write(run)

    async def stage_jobs(self, limit: int, *, now: datetime | None = None) -> dict[str, int]:
        check_now(now)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise ValidationError("limit", limit, "must be an integer >= 0")
        statement = FILES["stage_jobs"]

        def run(tx: Tx) -> dict[str, int]:
            clock = time_text(utc_clock(now))
            staged = Counter(row[0] for row in tx.conn.execute(statement, {"now": clock, "limit": limit}))
            for queue in sorted(staged):
                tx.notify("insert", {"queue": queue}, clock)
            return dict(staged)

        return await self.database.write(run)

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

    # -- leadership --------------------------------------------------------------------------
    async def elect_leader(
        self, name: str, node: str, ttl: float, *, now: datetime | None = None
    ) -> LeaderInfo | None:
        check_now(now)
        statement = FILES["elect_leader"]

        def run(tx: Tx) -> Any:
            clock = utc_clock(now)
            params = {
                "name": name,
                "node": node,
                "now": time_text(clock),
                "expires_at": later_text(clock, ttl),
            }
            return tx.conn.execute(statement, params).fetchone()

        row = await self.database.write(run)
        return LeaderInfo(row[0], parse_time(row[1])) if row else None

    async def resign_leader(self, name: str, node: str) -> bool:
        statement = FILES["resign_leader"]

        def run(tx: Tx) -> bool:
            rows = tx.conn.execute(statement, {"name": name, "node": node}).fetchall()
            clock = time_text(utc_clock(None))
            for resigned, by in rows:
                tx.notify("leader", {"action": "resign", "node": by, "name": resigned}, clock)
            return bool(rows)

        return await self.database.write(run)

    async def get_leader(self, name: str, *, now: datetime | None = None) -> LeaderInfo | None:
        check_now(now)
        statement = FILES["get_leader"]

        def run(conn: sqlite3.Connection) -> Any:
            return conn.execute(statement, {"name": name, "now": time_text(utc_clock(now))}).fetchone()

        row = await self.database.read(run)
        return LeaderInfo(row[0], parse_time(row[1]), parse_optional_time(row[2])) if row else None

    # -- producers and rescue ----------------------------------------------------------------
    async def record_producers(
        self, name: str, node: str, beats: Sequence[ProducerBeat], *, now: datetime | None = None
    ) -> None:
        check_now(now)
        if not beats:
            return
        records = orjson.dumps([{"uuid": b.uuid, "queue": b.queue, "meta": b.meta} for b in beats]).decode()
        statement = FILES["upsert_producers"]

        def run(tx: Tx) -> None:
            clock = time_text(utc_clock(now))
            tx.conn.execute(statement, {"name": name, "node": node, "producers": records, "now": clock})

        await self.database.write(run)

    async def delete_producers(self, uuids: Sequence[str]) -> None:
        if not uuids:
            return
        params = {"uuids": orjson.dumps(list(uuids)).decode()}
        statement = FILES["delete_producers"]
        await self.database.write(lambda tx: tx.conn.execute(statement, params))

    async def list_producers(self) -> list[ProducerInfo]:
        statement = FILES["list_producers"]
        rows = await self.database.read(lambda conn: conn.execute(statement).fetchall())
        return [
            ProducerInfo(r[0], r[1], r[2], r[3], orjson.loads(r[4]), parse_time(r[5]), parse_time(r[6]))
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
        check_now(now)
        rescue, forget = FILES["rescue_jobs"], FILES["delete_dead_producers"]
        live_json = orjson.dumps(list(live)).decode()

        def run(tx: Tx) -> list[Any]:
            clock = utc_clock(now)
            stamp, dead_before = time_text(clock), _ago(clock, timeout)
            params = {
                "now": stamp,
                "dead_before": dead_before,
                "backstop_before": _ago(clock, backstop),
                "limit": limit,
                "live": live_json,
            }
            rows = sorted(tx.conn.execute(rescue, params).fetchall())
            for queue in sorted({row[1] for row in rows if row[2] == "available"}):
                tx.notify("insert", {"queue": queue}, stamp)
            tx.conn.execute(forget, {"dead_before": dead_before, "live": live_json})
            return rows

        rows = await self.database.write(run)
        return RescueResult(
            available=tuple(r[0] for r in rows if r[2] == "available"),
            discarded=tuple(r[0] for r in rows if r[2] == "discarded"),
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
        check_now(now)

        def run(tx: Tx) -> int:
            clock = utc_clock(now)
            conn = tx.conn
            deleted = conn.execute(
                FILES["prune_jobs"], {"cutoff": _ago(clock, max_age), "limit": limit}
            ).rowcount
            if keep_per_queue is not None:
                for (queue,) in conn.execute(FILES["final_queues"]).fetchall():
                    params = {"queue": queue, "keep": keep_per_queue, "limit": limit}
                    deleted += conn.execute(FILES["prune_queue_excess"], params).rowcount
            conn.execute(FILES["prune_cron_ticks"], {"cutoff": _ago(clock, max(max_age, 86400.0))})
            return int(deleted)

        return await self.database.write(run)

    # -- cron --------------------------------------------------------------------------------
    async def insert_cron_jobs(self, ticks: Sequence[CronTick], *, now: datetime | None = None) -> list[int]:
        """Insert the job of each tick not handled before (by anyone); return the new job ids."""
        check_now(now)
        if not ticks:
            return []
        claim, insert = FILES["claim_cron_tick"], FILES["cron_job"]

        def run(tx: Tx) -> list[int]:
            clock = time_text(utc_clock(now))
            ids: list[int] = []
            queues: set[str] = set()
            for tick in ticks:
                claimed = tx.conn.execute(
                    claim, {"name": tick.name, "tick": time_text(tick.tick), "now": clock}
                ).fetchall()
                if not claimed:
                    continue
                request = tick.request
                params = {
                    "queue": request.queue,
                    "worker": request.worker,
                    "args": request.args_json.decode(),
                    "meta": request.meta_json.decode(),
                    "tags": orjson.dumps(request.tags).decode(),
                    "priority": request.priority,
                    "max_attempts": request.max_attempts,
                    "now": clock,
                }
                ids.append(tx.conn.execute(insert, params).fetchone()[0])
                queues.add(request.queue)
            for queue in sorted(queues):
                tx.notify("insert", {"queue": queue}, clock)
            return sorted(ids)

        return await self.database.write(run)

    async def last_cron_ticks(self, names: Sequence[str]) -> dict[str, datetime]:
        if not names:
            return {}
        params = {"names": orjson.dumps(list(names)).decode()}
        statement = FILES["last_cron_ticks"]
        rows = await self.database.read(lambda conn: conn.execute(statement, params).fetchall())
        return {row[0]: parse_time(row[1]) for row in rows}

    # -- queue state -------------------------------------------------------------------------
    async def save_queue_state(
        self, name: str, queue: str, *, paused: bool | None = None, limit: int | None = None
    ) -> None:
        statement = FILES["save_queue_state"]

        def run(tx: Tx) -> None:
            params = {
                "name": name,
                "queue": queue,
                "paused": None if paused is None else int(bool(paused)),
                "limit": limit,
                "now": time_text(utc_clock(None)),
            }
            tx.conn.execute(statement, params)

        await self.database.write(run)

    async def load_queue_states(self, name: str) -> dict[str, QueueState]:
        statement = FILES["load_queue_states"]
        rows = await self.database.read(lambda conn: conn.execute(statement, {"name": name}).fetchall())
        return {
            row[0]: QueueState(paused=None if row[1] is None else bool(row[1]), limit=row[2]) for row in rows
        }

    async def still_executing(self, attempts: Sequence[tuple[int, int]]) -> set[int]:
        if not attempts:
            return set()
        params = {"jobs": orjson.dumps([{"id": i, "attempt": a} for i, a in attempts]).decode()}
        statement = FILES["still_executing"]
        rows = await self.database.read(lambda conn: conn.execute(statement, params).fetchall())
        return {row[0] for row in rows}

    async def lost_claims(
        self, producers: Sequence[str], *, older_than: float, now: datetime | None = None
    ) -> list[tuple[int, int]]:
        check_now(now)
        if not producers:
            return []
        statement = FILES["lost_claims"]
        params = {
            "producers": orjson.dumps(list(producers)).decode(),
            "claimed_before": _ago(utc_clock(now), older_than),
        }
        rows = await self.database.read(lambda conn: conn.execute(statement, params).fetchall())
        return [(row[0], row[1]) for row in rows]

    def is_transient(self, exc: BaseException) -> bool:
        return is_transient(exc)


def _ago(clock: datetime, seconds: float) -> str:
    return time_text(clock - timedelta(seconds=seconds))


def _limit(criteria: JobFilter) -> int:
    """SQLite's LIMIT takes -1 for "no limit" (PostgreSQL: NULL)."""
    return criteria.limit if criteria.limit is not None else -1
