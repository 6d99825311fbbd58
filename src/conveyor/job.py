"""The job as stored: a row of ``oban_jobs`` as an immutable value."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar


class JobId(int):
    """A job's id as ``enqueue`` returns it: an ``int`` in every way, which also tells whether the
    request made a new job (``conflict`` False) or matched one that already existed and was not
    inserted again (``conflict`` True: a unique job, see ``ExistingJobId``)."""

    __slots__ = ()
    conflict: ClassVar[bool] = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}({int(self)})"

    __str__ = int.__repr__  # printed, or in an f-string, it is just the number


class ExistingJobId(JobId):
    """The id of a job that already existed: the request conflicted with it and was not inserted.
    Engines return these from ``insert`` in the place of such a request."""

    __slots__ = ()
    conflict: ClassVar[bool] = True


class JobState(enum.StrEnum):
    """The ``oban_job_state`` labels. Never rely on their order: Oban variants order them differently."""

    AVAILABLE = "available"
    SCHEDULED = "scheduled"
    SUSPENDED = "suspended"
    EXECUTING = "executing"
    RETRYABLE = "retryable"
    COMPLETED = "completed"
    DISCARDED = "discarded"
    CANCELLED = "cancelled"

    @property
    def is_final(self) -> bool:
        """True for the states a job does not leave by itself: completed, cancelled, discarded."""
        return self in FINAL_STATES


FINAL_STATES = frozenset({JobState.COMPLETED, JobState.DISCARDED, JobState.CANCELLED})
#: States a job can be cancelled from (anything not yet final).
CANCELLABLE_STATES = frozenset(set(JobState) - FINAL_STATES)
#: States a job can be retried from (made available again now).
RETRYABLE_STATES = frozenset(
    {
        JobState.SCHEDULED,
        JobState.RETRYABLE,
        JobState.COMPLETED,
        JobState.DISCARDED,
        JobState.CANCELLED,
        JobState.SUSPENDED,
    }
)


@dataclass(frozen=True, slots=True)
class Job:
    """A job as read from the database. Timestamps are timezone-aware UTC datetimes."""

    id: int
    state: JobState
    queue: str
    worker: str
    args: dict[str, Any]
    meta: dict[str, Any]
    tags: tuple[str, ...]
    errors: tuple[dict[str, Any], ...]
    attempt: int
    max_attempts: int
    priority: int
    attempted_by: tuple[str, ...]
    inserted_at: datetime
    scheduled_at: datetime
    attempted_at: datetime | None = None
    cancelled_at: datetime | None = None
    completed_at: datetime | None = None
    discarded_at: datetime | None = None
    #: Why the stored row could not be read as it is, or None for every healthy row. Such a row
    #: (written by another client, or edited by hand) still shows up; the fields that could not be
    #: read hold neutral values (empty args, the epoch for a time). A node never runs it: it ends
    #: the job ``discarded`` with this reason in ``errors``.
    unreadable: str | None = None

    @property
    def progress(self) -> dict[str, Any]:
        """What the job reported with ``progress(...)`` (``meta["progress"]``), kept after it ends;
        ``{}`` when it reported nothing (or another client stored something else there)."""
        value = self.meta.get("progress") if isinstance(self.meta, dict) else None
        return dict(value) if isinstance(value, dict) else {}

    @property
    def signals(self) -> list[dict[str, Any]]:
        """The messages sent to this job with ``Conveyor.signal``, oldest first (``meta["signals"]``;
        entries another client stored that are not JSON objects are left out)."""
        value = self.meta.get("signals") if isinstance(self.meta, dict) else None
        return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []

    @property
    def result(self) -> Any:
        """The value the job recorded (``Record``, or ``record=True``), decoded; None when it
        recorded nothing. Raises ``UnreadableResultError`` when the stored value cannot be read."""
        from conveyor.recorded import decode_result  # recorded imports errors only; kept lazy anyway

        try:
            return decode_result(self.meta)
        except LookupError:
            return None


def _slot_setter(name: str) -> Any:
    return Job.__dict__[name].__set__


# The slots' own setters: a frozen dataclass's __init__ assigns each field through
# object.__setattr__ (its own __setattr__ refuses), about twice the cost of these.
_new = object.__new__
_set_id, _set_state, _set_queue, _set_worker = map(_slot_setter, ("id", "state", "queue", "worker"))
_set_args, _set_meta, _set_tags, _set_errors = map(_slot_setter, ("args", "meta", "tags", "errors"))
_set_attempt, _set_max_attempts = _slot_setter("attempt"), _slot_setter("max_attempts")
_set_priority, _set_attempted_by = _slot_setter("priority"), _slot_setter("attempted_by")
_set_inserted_at, _set_scheduled_at = _slot_setter("inserted_at"), _slot_setter("scheduled_at")
_set_attempted_at, _set_cancelled_at = _slot_setter("attempted_at"), _slot_setter("cancelled_at")
_set_completed_at, _set_discarded_at = _slot_setter("completed_at"), _slot_setter("discarded_at")
_set_unreadable = _slot_setter("unreadable")


def stored_job(
    id: int,
    state: JobState,
    queue: str,
    worker: str,
    args: dict[str, Any],
    meta: dict[str, Any],
    tags: tuple[str, ...],
    errors: tuple[dict[str, Any], ...],
    attempt: int,
    max_attempts: int,
    priority: int,
    attempted_by: tuple[str, ...],
    inserted_at: datetime,
    scheduled_at: datetime,
    attempted_at: datetime | None,
    cancelled_at: datetime | None,
    completed_at: datetime | None,
    discarded_at: datetime | None,
) -> Job:
    """``Job(...)`` of a healthy row, as the engines build one for every fetched job: the same value
    for about half the cost (the fetch of a busy node builds thousands a second)."""
    job: Job = _new(Job)
    _set_id(job, id)
    _set_state(job, state)
    _set_queue(job, queue)
    _set_worker(job, worker)
    _set_args(job, args)
    _set_meta(job, meta)
    _set_tags(job, tags)
    _set_errors(job, errors)
    _set_attempt(job, attempt)
    _set_max_attempts(job, max_attempts)
    _set_priority(job, priority)
    _set_attempted_by(job, attempted_by)
    _set_inserted_at(job, inserted_at)
    _set_scheduled_at(job, scheduled_at)
    _set_attempted_at(job, attempted_at)
    _set_cancelled_at(job, cancelled_at)
    _set_completed_at(job, completed_at)
    _set_discarded_at(job, discarded_at)
    _set_unreadable(job, None)
    return job
