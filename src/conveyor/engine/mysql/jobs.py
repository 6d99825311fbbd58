"""Managing jobs on MySQL/MariaDB: get, list, count, cancel, retry, delete, through the filter
fragments (``filter_*.sql``). Bulk actions lock their targets first (lowest ids, up to the limit),
then change them by id: MySQL's UPDATE and DELETE return no rows."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any

import orjson

from conveyor.engine.mysql.caller import joined, run_blocking
from conveyor.engine.mysql.connect import rerun_victims
from conveyor.engine.mysql.core import MysqlCore
from conveyor.engine.mysql.hot_path import notify, notify_ended
from conveyor.engine.mysql.producers import list_stopping
from conveyor.engine.mysql.rows import check_now, id_array, read_jobs, utc_clock
from conveyor.engine.mysql.workflows import MysqlWorkflows
from conveyor.filters import JobFilter
from conveyor.job import Job, JobState
from conveyor.stats import countable

#: The filter fragments (``filter_<name>.sql``), combined with AND: one per JobFilter field, except
#: ``completed`` for completed_after and completed_before together.
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
#: The criteria that hold a list: passed as a sequence, which the driver renders ``(a, b, ...)``.
LISTS = frozenset({"ids", "states", "queues", "workers"})
DEFAULT_LIST_LIMIT = 100
#: MySQL's LIMIT takes no NULL: "no limit" is the largest count it takes.
NO_LIMIT = 18446744073709551615


def filter_condition(core: MysqlCore, criteria: JobFilter) -> tuple[str, dict[str, Any]]:
    """The WHERE condition for ``criteria`` (only the parts it uses) and its parameters."""
    params: dict[str, Any] = {}
    used: list[str] = []
    for name in FILTER_PARTS:
        if name == "completed":
            if criteria.completed_after is None and criteria.completed_before is None:
                continue
            params["completed_after"] = _time(criteria.completed_after)
            params["completed_before"] = _time(criteria.completed_before)
        else:
            value = getattr(criteria, name)
            if value is None or value == ():
                continue
            if name in ("args_contains", "tags"):
                params[name] = orjson.dumps(value).decode()
            elif name in LISTS:
                params[name] = tuple(getattr(v, "value", v) for v in value)
            else:
                params[name] = _time(value) if isinstance(value, datetime) else value
        used.append(name)
    files = core.files
    condition = "\n  AND ".join(_fragment(files[f"filter_{name}"]) for name in used) or "TRUE"
    return condition, params


def _fragment(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--")).strip()


def _time(value: datetime | None) -> datetime | None:
    return None if value is None else utc_clock(value)


class MysqlJobs(MysqlWorkflows):
    """``get_job``, ``list_jobs``, ``count_jobs``, ``cancel_jobs``, ``retry_jobs``, ``delete_jobs``
    (``estimate_jobs`` is in ``stats.py``)."""

    def _statement(self, name: str, condition: str = "") -> str:
        text = self.files.compose(name, columns="job_columns", step_with_deps="step_with_deps")
        return text.replace("{filter}", condition)

    async def get_job(self, job_id: int) -> Job | None:
        async with self.reading() as cursor:
            await cursor.execute(self._statement("get_job"), {"id": job_id})
            rows = await cursor.fetchall()
        return read_jobs(rows)[0] if rows else None

    async def list_jobs(self, criteria: JobFilter) -> list[Job]:
        condition, params = filter_condition(self, criteria)
        params["limit"] = criteria.limit if criteria.limit is not None else DEFAULT_LIST_LIMIT
        async with self.reading() as cursor:
            await cursor.execute(self._statement("list_jobs", condition), params)
            return read_jobs(await cursor.fetchall())

    def list_jobs_sync(self, criteria: JobFilter, *, conn: Any) -> list[Job]:
        """``list_jobs`` in the caller's transaction on a PyMySQL connection (what it wrote and
        has not committed included)."""
        return run_blocking(self._list_jobs_on(criteria, conn))

    async def _list_jobs_on(self, criteria: JobFilter, conn: Any) -> list[Job]:
        condition, params = filter_condition(self, criteria)
        params["limit"] = criteria.limit if criteria.limit is not None else DEFAULT_LIST_LIMIT
        async with joined(conn, blocking=True) as cursor:
            await cursor.execute(self._statement("list_jobs", condition), params)
            return read_jobs(await cursor.fetchall())

    async def count_jobs(self, criteria: JobFilter) -> int:
        countable(criteria)
        condition, params = filter_condition(self, criteria)
        async with self.reading() as cursor:
            await cursor.execute(self._statement("count_jobs", condition), params)
            (row,) = await cursor.fetchall()
        return int(row[0])

    def _targets(self, name: str, criteria: JobFilter) -> tuple[str, dict[str, Any]]:
        """A bulk action's locking read of its targets, read by the primary key when the filter
        names ids (``by_ids.sql``)."""
        condition, params = filter_condition(self, criteria)
        params["limit"] = criteria.limit if criteria.limit is not None else NO_LIMIT
        hint = _fragment(self.files["by_ids"]) if criteria.ids else ""
        return self._statement(name, condition).replace("{by_ids}", hint), params

    async def cancel_jobs(
        self, criteria: JobFilter, *, now: datetime | None = None, conn: Any = None
    ) -> list[int]:
        check_now(now)
        statement, params = self._targets("cancel_targets", criteria)
        async with self.within(conn) as cursor:
            await cursor.execute(statement, params)
            rows = await cursor.fetchall()
            targets = [(int(row[0]), row[1]) for row in rows]
            if not targets:
                return []
            ids = [job_id for job_id, _ in targets]
            await cursor.execute(self.files["cancel_jobs"], {"ids": tuple(ids), "now": utc_clock(now)})
            await list_stopping(cursor, self.files, [(int(r[0]), r[2]) for r in rows if r[1] == "executing"])
            for job_id, state in targets:
                if state == "executing":
                    await notify(cursor, self, "signal", {"action": "pkill", "job_id": job_id})
            await notify_ended(cursor, self, ids)
        await self.settle_after(ids, now, conn)  # cancelled steps end: the steps after them settle
        return ids

    async def retry_jobs(
        self, criteria: JobFilter, *, now: datetime | None = None, conn: Any = None
    ) -> list[int]:
        check_now(now)
        # A deadlock victim (retries racing inserts of their unique twins) runs again, but not in a
        # caller's transaction: the rollback took the caller's work too.
        ids, steps = await rerun_victims(
            lambda: self._retry_in_transaction(criteria, now, conn), once=conn is not None
        )
        if steps:  # those whose dependency stays failed are cancelled again, and not retried
            settled = await self.settle_after(steps, now, conn)
            return [job_id for job_id in ids if settled.get(job_id) is not JobState.CANCELLED]
        return ids

    async def _retry_in_transaction(
        self, criteria: JobFilter, now: datetime | None, conn: Any
    ) -> tuple[list[int], list[int]]:
        """The retry's one transaction: the ids made available (or held), and the held steps."""
        statement, params = self._targets("retry_targets", criteria)
        files = self.files
        async with self.within(conn) as cursor:
            await cursor.execute(statement, params)
            rows = await cursor.fetchall()
            if not rows:
                return [], []
            ids = [int(row[0]) for row in rows]
            # A unique job keeps its key unless a twin holds it, or another job of this retry has it
            # too: then it runs as a plain job (available again, it would break the unique index).
            keyed = [(int(row[0]), row[2]) for row in rows if row[2] is not None]
            if keyed:
                keys = sorted({key for _, key in keyed})
                await cursor.execute(files["unique_holders"], {"keys": tuple(keys), "ids": tuple(ids)})
                held = {row[0] for row in await cursor.fetchall()}
                twice = {key for key, count in Counter(key for _, key in keyed).items() if count > 1}
                strip = [job_id for job_id, key in keyed if key in held or key in twice]
                if strip:
                    await cursor.execute(files["drop_unique_markers"], {"ids": tuple(strip)})
            await cursor.execute(files["retry_jobs"], {"ids": tuple(ids), "now": utc_clock(now)})
            # Steps with dependencies are held until those finish, then settled after the commit.
            steps = [int(row[0]) for row in rows if row[3]]
            if steps:
                await cursor.execute(files["hold_jobs"], (tuple(steps),))
            for queue in sorted({row[1] for row in rows if not row[3]}):
                await notify(cursor, self, "insert", {"queue": queue})
        return ids, steps

    async def delete_jobs(self, criteria: JobFilter, *, conn: Any = None) -> list[int]:
        statement, params = self._targets("delete_targets", criteria)
        async with self.within(conn) as cursor:
            await cursor.execute(statement, params)
            ids = [int(row[0]) for row in await cursor.fetchall()]
            if ids:
                await cursor.execute(self.files["delete_jobs"], {"ids": id_array(ids)})
        return ids
