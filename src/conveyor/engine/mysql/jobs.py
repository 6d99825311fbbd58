"""Reading jobs on MySQL/MariaDB: get and list, through the filter fragments (``filter_*.sql``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import orjson

from conveyor.engine.mysql.core import MysqlCore
from conveyor.engine.mysql.rows import read_jobs, utc_clock
from conveyor.filters import JobFilter
from conveyor.job import Job

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
                params[name] = [getattr(v, "value", v) for v in value]
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


class MysqlJobs(MysqlCore):
    """``get_job`` and ``list_jobs`` (cancel, retry and delete are pending)."""

    def _statement(self, name: str, condition: str = "") -> str:
        text = self.files.compose(name, columns="job_columns")
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
