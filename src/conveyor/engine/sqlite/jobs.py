"""Managing jobs on SQLite: get, list, cancel, retry, delete."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

import orjson

from conveyor.engine.sqlite import foreign
from conveyor.engine.sqlite.core import FILES, compose
from conveyor.engine.sqlite.database import WriteTx
from conveyor.engine.sqlite.hot_path import notify_ended
from conveyor.engine.sqlite.rows import check_now, read_jobs, time_text, utc_clock
from conveyor.engine.sqlite.workflows import SqliteWorkflows, settle_beside
from conveyor.filters import JobFilter
from conveyor.job import Job, JobState

#: The filter fragments (``filter_<name>.sql``), in the order they are combined with AND: one per
#: JobFilter field, except ``completed`` for completed_after and completed_before together.
FILTER_PARTS = (
    "ids",
    "states",
    "queues",
    "workers",
    "tags",
    "before_id",
    "after_id",
    "worker_suffix",
    "scheduled_after",
    "scheduled_before",
    "attempted_after",
    "attempted_before",
    "completed",
    "args_contains",
)
#: The criteria that hold a list, passed to their fragment as a JSON array.
LISTS = frozenset({"ids", "states", "queues", "workers", "tags"})
DEFAULT_LIST_LIMIT = 100

T = TypeVar("T")


def filter_condition(criteria: JobFilter) -> tuple[str, dict[str, Any]]:
    """The WHERE condition for ``criteria`` (only the parts it uses) and its parameters."""
    params: dict[str, Any] = {}
    used: list[str] = []
    for name in FILTER_PARTS:
        if name == "completed":  # one range, both bounds (None: open), one index read
            if criteria.completed_after is None and criteria.completed_before is None:
                continue
            params["completed_after"] = _time(criteria.completed_after)
            params["completed_before"] = _time(criteria.completed_before)
        else:
            value = getattr(criteria, name)
            if value is None or value == ():
                continue
            if name == "args_contains":
                params[name] = orjson.dumps(value).decode()
            elif name in LISTS:
                params[name] = orjson.dumps([getattr(v, "value", v) for v in value]).decode()
            else:
                params[name] = _time(value) if isinstance(value, datetime) else value
        used.append(name)
    return _condition(tuple(used)), params


def _time(value: datetime | None) -> str | None:
    return None if value is None else time_text(utc_clock(value))


_conditions: dict[tuple[str, ...], str] = {}


def _condition(used: tuple[str, ...]) -> str:
    found = _conditions.get(used)
    if found is None:
        found = "\n  AND ".join(FILES[f"filter_{name}"].strip() for name in used) or "1"
        _conditions[used] = found
    return found


class SqliteJobs(SqliteWorkflows):
    """``get_job``, ``list_jobs``, ``cancel_jobs``, ``retry_jobs``, ``delete_jobs``."""

    async def _write(self, write: Callable[[WriteTx], T], conn: Any) -> T:
        """Run ``write`` in a transaction of the engine's own or, with ``conn``, in the caller's."""
        if conn is not None:
            return await foreign.write_in_caller_tx(conn, write)
        return await self.database.write(write)

    async def get_job(self, job_id: int) -> Job | None:
        statement = self._get

        def run(conn: sqlite3.Connection) -> list[Any]:
            return conn.execute(statement, {"id": job_id}).fetchall()

        rows = await self.database.read(run)
        return read_jobs(rows)[0] if rows else None

    async def list_jobs(self, criteria: JobFilter) -> list[Job]:
        condition, params = filter_condition(criteria)
        params["limit"] = criteria.limit if criteria.limit is not None else DEFAULT_LIST_LIMIT
        statement = compose("list_jobs", condition)

        def run(conn: sqlite3.Connection) -> list[Any]:
            return conn.execute(statement, params).fetchall()

        return read_jobs(await self.database.read(run))

    def list_jobs_sync(self, criteria: JobFilter, *, conn: Any) -> list[Job]:
        condition, params = filter_condition(criteria)
        params["limit"] = criteria.limit if criteria.limit is not None else DEFAULT_LIST_LIMIT
        statement = compose("list_jobs", condition)
        return read_jobs(foreign.sync_driver_connection(conn).execute(statement, params).fetchall())

    async def cancel_jobs(
        self, criteria: JobFilter, *, now: datetime | None = None, conn: Any = None
    ) -> list[int]:
        check_now(now)
        condition, params = filter_condition(criteria)
        params["limit"] = _limit(criteria)
        targets_sql = compose("cancel_targets", condition)
        cancel_sql = FILES["cancel_jobs"]

        def run(tx: WriteTx) -> list[int]:
            targets = tx.conn.execute(targets_sql, params).fetchall()
            if not targets:
                return []
            clock = time_text(utc_clock(now))
            ids = orjson.dumps([row[0] for row in targets]).decode()
            cancelled = [row[0] for row in tx.conn.execute(cancel_sql, {"ids": ids, "now": clock})]
            stopped = [job_id for job_id, state in targets if state == "executing"]
            if stopped:  # they keep their lock and slot until their node's run is over
                tx.conn.execute(FILES["stop_listed"], {"ids": orjson.dumps(stopped).decode()})
            for job_id in stopped:
                tx.notify("signal", {"action": "pkill", "job_id": job_id}, clock)
            if cancelled:  # cancelled steps end: the steps that depend on them settle now
                settle_beside(tx, cancelled, now)
                notify_ended(tx, sorted(cancelled), clock)
            return sorted(cancelled)

        return await self._write(run, conn)

    async def retry_jobs(
        self, criteria: JobFilter, *, now: datetime | None = None, conn: Any = None
    ) -> list[int]:
        check_now(now)
        condition, params = filter_condition(criteria)
        params["limit"] = _limit(criteria)
        statement = compose("retry_jobs", condition)

        def run(tx: WriteTx) -> list[int]:
            clock = time_text(utc_clock(now))
            rows = tx.conn.execute(statement, params | {"now": clock}).fetchall()
            for queue in sorted({row[1] for row in rows if row[2] == "available"}):
                tx.notify("insert", {"queue": queue}, clock)
            # Steps held until their dependencies finish settle now: those whose dependencies
            # completed go on at once, those whose dependency stays failed are cancelled again by
            # their policy, and are not retried.
            held = [row[0] for row in rows if row[2] == "suspended"]
            settled = settle_beside(tx, held, now) if held else {}
            return sorted(row[0] for row in rows if settled.get(row[0]) is not JobState.CANCELLED)

        return await self._write(run, conn)

    async def delete_jobs(self, criteria: JobFilter, *, conn: Any = None) -> list[int]:
        condition, params = filter_condition(criteria)
        params["limit"] = _limit(criteria)
        statement = compose("delete_jobs", condition)

        def run(tx: WriteTx) -> list[int]:
            return sorted(row[0] for row in tx.conn.execute(statement, params).fetchall())

        return await self._write(run, conn)


def _limit(criteria: JobFilter) -> int:
    """SQLite's LIMIT takes -1 for "no limit" (PostgreSQL: NULL)."""
    return criteria.limit if criteria.limit is not None else -1
