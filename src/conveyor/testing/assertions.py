"""Asserting what was enqueued: ``all_enqueued``, ``assert_enqueued``, ``refute_enqueued``.

Enqueued means waiting to run: available, scheduled, or suspended (a workflow step waiting for its
dependencies). Filters match partially: ``args`` and ``meta`` match when the job's hold every
given key with an equal value, ``tags`` when the job carries all of them, ``scheduled_at`` within
``delta`` seconds; ``worker`` takes a name, a job function or a worker class.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from conveyor.current_app import current_app
from conveyor.definition import definition_of
from conveyor.errors import ValidationError
from conveyor.filters import MAX_PAGE, JobFilter
from conveyor.job import Job, JobState

if TYPE_CHECKING:
    from conveyor.app import Conveyor

ENQUEUED = (JobState.AVAILABLE, JobState.SCHEDULED, JobState.SUSPENDED)
FILTERS = ("worker", "queue", "args", "meta", "tags", "priority", "max_attempts", "scheduled_at", "state")


async def all_enqueued(*, app: Conveyor | None = None, delta: float = 1.0, **filters: Any) -> list[Job]:
    """The enqueued jobs matching every filter, newest first."""
    app = app or current_app()
    criteria, wanted = query(filters)
    found: list[Job] = []
    before: int | None = None
    while True:
        page = await app.list_jobs(JobFilter(**criteria, limit=MAX_PAGE, before_id=before))
        found.extend(job for job in page if matches(job, wanted, delta))
        if len(page) < MAX_PAGE:
            return found
        before = page[-1].id


def query(filters: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``JobFilter`` criteria of ``filters``, and what is left to match job by job."""
    wanted = _check(filters)
    states = (wanted.pop("state"),) if "state" in wanted else ENQUEUED
    criteria: dict[str, Any] = {"states": states}
    if "queue" in wanted:
        criteria["queues"] = (wanted.pop("queue"),)
    if "worker" in wanted:
        criteria["workers"] = (wanted.pop("worker"),)
    if "tags" in wanted:
        criteria["tags"] = tuple(wanted.pop("tags"))
    return criteria, wanted


async def assert_enqueued(
    *, app: Conveyor | None = None, timeout: float = 0, delta: float = 1.0, **filters: Any
) -> Job:
    """Fail unless a matching job is enqueued (waiting up to ``timeout`` seconds for one); return
    the newest match."""
    found = await _poll(lambda jobs: bool(jobs), app, timeout, delta, filters)
    if not found:
        raise AssertionError(missing(filters, timeout, await all_enqueued(app=app)))
    return found[0]


async def refute_enqueued(
    *, app: Conveyor | None = None, timeout: float = 0, delta: float = 1.0, **filters: Any
) -> None:
    """Fail if a matching job is enqueued (watching for ``timeout`` seconds)."""
    found = await _poll(lambda jobs: bool(jobs), app, timeout, delta, filters)
    if found:
        raise AssertionError(unexpected(filters, found))


def missing(filters: dict[str, Any], timeout: float, everything: list[Job]) -> str:
    """``assert_enqueued``'s failure: what was asked, and what is enqueued instead."""
    listed = "\n".join(f"  {describe(job)}" for job in everything[:20]) or "  (nothing)"
    within = f" within {timeout:g}s" if timeout else ""
    return f"no job matching {filters} was enqueued{within}; enqueued:\n{listed}"


def unexpected(filters: dict[str, Any], found: list[Job]) -> str:
    """``refute_enqueued``'s failure: the jobs that should not be there."""
    listed = "\n".join(f"  {describe(job)}" for job in found[:20])
    return f"expected no job matching {filters}; enqueued:\n{listed}"


async def _poll(
    done: Any, app: Conveyor | None, timeout: float, delta: float, filters: dict[str, Any]
) -> list[Job]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        found = await all_enqueued(app=app, delta=delta, **filters)
        if done(found) or loop.time() >= deadline:
            return found
        await asyncio.sleep(min(0.02, max(0.0, deadline - loop.time())))


def _check(filters: dict[str, Any]) -> dict[str, Any]:
    wanted = dict(filters)
    for name, value in wanted.items():
        if name not in FILTERS:
            raise ValidationError(name, value, f"unknown filter; expected one of {', '.join(FILTERS)}")
        if name in ("args", "meta") and not isinstance(value, Mapping):
            raise ValidationError(name, value, "must be a mapping of the keys to match")
    if "state" in wanted:
        try:
            wanted["state"] = JobState(wanted["state"])
        except ValueError:
            raise ValidationError("state", wanted["state"], "must be a job state") from None
    worker = wanted.get("worker")
    if worker is not None and not isinstance(worker, str):
        definition = definition_of(worker)
        if definition is None:
            raise ValidationError("worker", worker, "must be a worker name, a job function or a worker class")
        wanted["worker"] = definition.name
    if isinstance(wanted.get("tags"), str):
        wanted["tags"] = (wanted["tags"],)
    when = wanted.get("scheduled_at")
    if when is not None:
        if not isinstance(when, datetime):
            raise ValidationError("scheduled_at", when, "must be a datetime")
        # Jobs hold aware UTC times; a naive one is taken as UTC, as the database stores time.
        wanted["scheduled_at"] = when.astimezone(UTC) if when.tzinfo else when.replace(tzinfo=UTC)
    return wanted


def matches(job: Job, wanted: dict[str, Any], delta: float) -> bool:
    for name, value in wanted.items():
        if name in ("args", "meta"):
            held = getattr(job, name)
            if not all(key in held and held[key] == item for key, item in value.items()):
                return False
        elif name == "scheduled_at":
            if abs((job.scheduled_at - value).total_seconds()) > delta:
                return False
        elif getattr(job, name) != value:
            return False
    return True


def describe(job: Job) -> str:
    return (
        f"#{job.id} {job.worker} queue={job.queue} state={job.state.value} args={job.args} "
        f"scheduled_at={job.scheduled_at.isoformat()}"
    )
