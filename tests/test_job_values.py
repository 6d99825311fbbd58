"""``stored_job``: the engines' fast way to build a ``Job`` makes exactly the value ``Job(...)`` does."""

from __future__ import annotations

import dataclasses
import inspect
from datetime import UTC, datetime

import pytest

from conveyor.job import Job, JobState, stored_job

NOW = datetime(2026, 11, 27, 7, 30, tzinfo=UTC)
FIELDS: dict[str, object] = {
    "id": 42,
    "state": JobState.EXECUTING,
    "queue": "mail",
    "worker": "app.jobs.send",
    "args": {"to": "a@example.com"},
    "meta": {"progress": {"done": 1}},
    "tags": ("a", "b"),
    "errors": ({"attempt": 1, "at": "2026-11-27T07:00:00Z", "error": "boom"},),
    "attempt": 2,
    "max_attempts": 20,
    "priority": 3,
    "attempted_by": ("node", "producer"),
    "inserted_at": NOW,
    "scheduled_at": NOW,
    "attempted_at": NOW,
    "cancelled_at": None,
    "completed_at": None,
    "discarded_at": NOW,
}


def test_it_takes_every_field_of_a_job_but_unreadable() -> None:
    # A field added to Job must be added to stored_job too, or its jobs would lack it.
    names = [field.name for field in dataclasses.fields(Job)]
    assert list(inspect.signature(stored_job).parameters) == [n for n in names if n != "unreadable"]


def test_it_builds_the_same_value_as_the_constructor() -> None:
    fast, plain = stored_job(**FIELDS), Job(**FIELDS)  # type: ignore[arg-type]
    assert fast == plain and repr(fast) == repr(plain)
    assert dataclasses.asdict(fast) == dataclasses.asdict(plain)
    assert fast.unreadable is None and type(fast) is Job


def test_its_jobs_are_as_frozen_as_any() -> None:
    job = stored_job(**FIELDS)  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.state = JobState.COMPLETED  # type: ignore[misc]
    assert dataclasses.replace(job, attempt=3).attempt == 3 and job.attempt == 2
